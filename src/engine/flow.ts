import { bullmqSpelling, describe, InvalidOptionError, RateLimitedError } from '../core/errors';
import { MAX_TIMER_MS } from '../core/limits';
import type { Key, RateLimit } from '../core/types';

/**
 * Flow control on the worker side: the rate limit a key's run claims under, and `retryAfter`.
 * The limit itself is enforced in Redis by the claim (includes/flow.lua), so it holds across
 * every worker process.
 */

/** Checks a rate limit; `where` names it in the error. */
export function validateRateLimit(limit: unknown, where: string): RateLimit {
  const l = limit as Partial<RateLimit> | null;
  const ok = (n: unknown) => typeof n === 'number' && Number.isInteger(n) && n >= 1 && n <= MAX_TIMER_MS;
  if (typeof l !== 'object' || l === null || !ok(l.max) || !ok(l.durationMs)) {
    throw new InvalidOptionError(
      `${where} must be { max, durationMs } with integers between 1 and ${MAX_TIMER_MS} (at most max ids per durationMs ms), got ` +
        (typeof l === 'object' && l !== null ? `{ max: ${describe(l.max)}, durationMs: ${describe(l.durationMs)} }` : describe(l)) +
        bullmqSpelling(l, 'duration', 'durationMs'),
    );
  }
  return { max: l.max!, durationMs: l.durationMs! };
}

export type RateLimitOption = RateLimit | ((key: Key) => RateLimit | undefined) | undefined;

/** Validates the option up front (a function's results are checked per run, see `rateLimitOf`). */
export function validateRateLimitOption(option: unknown): RateLimitOption {
  if (option === undefined || typeof option === 'function') return option as RateLimitOption;
  return validateRateLimit(option, 'options.rateLimit');
}

/** The limit a run of `key` claims under; a function's bad result throws (the run retries it, logged). */
export function rateLimitOf(option: RateLimitOption, key: Key): RateLimit | undefined {
  if (typeof option !== 'function') return option;
  const limit = option(key);
  return limit === undefined ? undefined : validateRateLimit(limit, `options.rateLimit(${JSON.stringify(key)})`);
}

/** `ctx.retryAfter(ms, { scope })`. */
export function retryAfter(ms: number, options?: { scope?: 'key' | 'batcher' }): never {
  throw new RateLimitedError({ retryAfterMs: ms, ...(options?.scope !== undefined && { scope: options.scope }) });
}

/**
 * Reads an HTTP `Retry-After` header (delay-seconds, or an HTTP-date) as ms from `now`; undefined
 * when it is missing or malformed. A date in the past gives 0.
 */
export function parseRetryAfter(header: string | null | undefined, now: number = Date.now()): number | undefined {
  if (header === null || header === undefined) return undefined;
  const value = header.trim();
  if (/^\d+$/.test(value)) return Math.min(MAX_TIMER_MS, Number(value) * 1000);
  const at = Date.parse(value);
  if (Number.isNaN(at) || !/[a-z]/i.test(value)) return undefined;
  return Math.min(MAX_TIMER_MS, Math.max(0, at - now));
}
