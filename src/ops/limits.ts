import { InvalidOptionError } from '../core/errors';
import { recordedLimits, recordLimit } from '../storage/agreement';
import type { Keyspace } from '../storage/keys';
import { readLimits } from '../storage/limits-protocol';
import type { RedisClient } from '../storage/scripts';
import { validateGlobalConcurrency } from '../engine/global-limits';
import { validateRateLimit } from '../engine/flow';
import { formatMs } from './html';
import type { GlobalLimitsStats, RateLimit } from '../core/types';

/**
 * The batcher-wide limits as an operator sees and sets them (the API, the CLI, the dashboard):
 * recorded in the batcher's config hash, which every worker reads (see engine/global-limits.ts).
 */

/** Sets (or, with null, turns off) `globalRateLimit`; bad input throws before anything is written. */
export async function setGlobalRateLimit(client: RedisClient, keyspace: Keyspace, limit: RateLimit | null): Promise<void> {
  const rate = limit === null ? undefined : validateRateLimit(limit, 'setGlobalRateLimit limit');
  await recordLimit(client, keyspace.config, 'rate', rate ? { rate } : {});
}

/** Sets (or, with null, turns off) `globalConcurrency`. */
export async function setGlobalConcurrency(client: RedisClient, keyspace: Keyspace, n: number | null): Promise<void> {
  const concurrency = n === null ? undefined : validateGlobalConcurrency(n, 'setGlobalConcurrency n');
  await recordLimit(client, keyspace.config, 'concurrency', concurrency ? { concurrency } : {});
}

/** The limits recorded and their use now, as stats() shows them. */
export async function globalLimitsStats(client: RedisClient, keyspace: Keyspace): Promise<GlobalLimitsStats> {
  const limits = await recordedLimits(client, keyspace.config);
  const use = await readLimits(client, keyspace.limits, limits.rate?.durationMs ?? 0);
  return {
    ...(limits.rate && { rate: { ...limits.rate, used: use.idsInWindow } }),
    ...(limits.concurrency !== undefined && { concurrency: { limit: limits.concurrency, running: use.running } }),
    waiting: use.waiting,
    heldMs: use.holdMs,
    waitedMs: use.waitedMs,
    waits: use.waits,
  };
}

/**
 * A limit as an operator types it (the CLI's `limits set`, the dashboard's form): `max/durationMs`
 * (600/60000, say) or a number of slices; 'off' turns it off (null). An InvalidOptionError otherwise.
 */
export function parseRateInput(text: string): RateLimit | null {
  if (text.trim() === 'off') return null;
  const [max, durationMs, ...rest] = text.split('/').map((part) => Number(part.trim()));
  if (rest.length > 0 || !(max! >= 1) || !(durationMs! >= 1)) {
    throw new InvalidOptionError(`a rate limit is max/durationMs (600/60000, say) or 'off', got ${JSON.stringify(text)}`);
  }
  return validateRateLimit({ max, durationMs }, 'rate limit');
}

export function parseConcurrencyInput(text: string): number | null {
  if (text.trim() === 'off') return null;
  return validateGlobalConcurrency(Number(text.trim() === '' ? NaN : text), 'concurrency');
}

/** One line for an operator (the CLI, the dashboard): each limit with its use, waits, a hold. */
export function describeLimits(l: GlobalLimitsStats): string {
  const parts = [
    l.rate ? `rate ${l.rate.used}/${l.rate.max} ids per ${formatMs(l.rate.durationMs)}` : 'rate unlimited',
    l.concurrency ? `concurrency ${l.concurrency.running}/${l.concurrency.limit} running` : 'concurrency unlimited',
    `${l.waiting} waiting`,
    `waited ${formatMs(l.waitedMs)} over ${l.waits} waits`,
  ];
  if (l.heldMs > 0) parts.push(`held ${formatMs(l.heldMs)}`);
  return parts.join(', ');
}
