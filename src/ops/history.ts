import type { Worker } from '../bullmq';
import { ClosedError } from '../core/errors';
import { samplesKept, type ResolvedHistory } from './history-options';
import { encodeKey, type HistoryNames } from '../storage/keys';
import { wellFormedText } from '../core/text';
import { log } from '../core/logger';
import { historyAppend, historyTick } from '../storage/batcher-protocol';
import type { RedisClient } from '../storage/scripts';
import { redisNow } from './stats';
import type { History, HistoryKey, HistorySample, Logger, Stats, StatsOptions } from '../core/types';

/**
 * The batcher's recent history: what `stats()` said every `intervalMs` over the last
 * `retentionMs`, kept in Redis so any process (the dashboard's, a producer's) can read it.
 *
 * Shared, not one sample per worker: each worker process ticks once per interval with one
 * script call (history-tick.lua) that adds the ids the process processed since its last tick to a
 * shared counter and claims the interval's bucket of the Redis clock if nobody did. Only the
 * claimant reads `stats()` (many reads: every indexed key) and appends the sample
 * (history-append.lua, which refuses a second sample of a bucket). Claiming first, rather than
 * computing and then appending if absent, keeps the cost of N processes at N small calls per
 * interval plus one `stats()`, instead of N `stats()`.
 *
 * Ids per second come from that counter: each sample records its value, and a reader divides the
 * difference between two samples by the time between them. A process's count lands at its next
 * tick, so one interval's figure may include ids of the previous one; over several samples the
 * rate is exact. Counting is a number added per slice (BatcherEmitter.onProcessed): the hot path
 * builds no event and makes no Redis call for it.
 */

/** The fields before the top keys, in order (see `encodeSample`). */
const HEAD = 9;

/**
 * A sample keeps at most this many UTF-16 code units of a top key's name (then '…'): long
 * non-ASCII names made a sample of 20 keys 184 KB (about 66 MB an hour per batcher); capped, a
 * sample stays under about 12 KB whatever the keys. Documented in docs/operations.md.
 */
export const MAX_SAMPLED_KEY = 64;

/** A key's name as a sample stores it (see MAX_SAMPLED_KEY). */
function sampledKey(key: string): string {
  return key.length <= MAX_SAMPLED_KEY ? key : `${wellFormedText(key, MAX_SAMPLED_KEY - 1)}…`;
}

/** The `top` keys with the most ids waiting and the `top` laggiest, merged, most waiting first. */
function topKeysOf(s: Stats, top: number): HistoryKey[] {
  const merged = new Map<string, HistoryKey>();
  for (const k of [...s.topKeys.slice(0, top), ...s.laggingKeys.slice(0, top)]) {
    merged.set(k.key, { key: k.key, backlog: k.pending + k.retrying, oldestPendingAgeMs: k.oldestPendingAgeMs });
  }
  return [...merged.values()].sort((a, b) => b.backlog - a.backlog || b.oldestPendingAgeMs - a.oldestPendingAgeMs);
}

/**
 * One sample as one short string, space-separated:
 * `at processed keys pending inFlight retrying dead lagMs truncated` and then `key backlog lagMs`
 * per top key (percent-encoded, so never a space). The time comes first: history-append.lua reads it.
 */
export function encodeSample(at: number, processed: number, s: Stats, topKeys: number): string {
  const head = [at, processed, s.keys, s.pending, s.inFlight, s.retrying, s.dead, s.oldestPendingAgeMs, s.truncated ? 1 : 0];
  const top = topKeysOf(s, topKeys).map((k) => `${encodeKey(sampledKey(k.key))} ${k.backlog} ${k.oldestPendingAgeMs}`);
  return [...head, ...top].join(' ');
}

type Decoded = HistorySample & { processed: number };

function decodeSample(entry: string): Decoded | undefined {
  const tokens = entry.split(' ');
  const head = tokens.slice(0, HEAD).map(Number);
  if (head.length < HEAD || !head.every(Number.isFinite) || (tokens.length - HEAD) % 3 !== 0) return undefined;
  const [at, processed, keys, pending, inFlight, retrying, dead, oldestPendingAgeMs, truncated] = head as [
    number,
    number,
    number,
    number,
    number,
    number,
    number,
    number,
    number,
  ];
  const topKeys: HistoryKey[] = [];
  for (let i = HEAD; i < tokens.length; i += 3) {
    let key: string;
    try {
      key = decodeURIComponent(tokens[i] as string);
    } catch {
      return undefined;
    }
    topKeys.push({ key, backlog: Number(tokens[i + 1]), oldestPendingAgeMs: Number(tokens[i + 2]) });
  }
  return { at, processed, keys, pending, inFlight, retrying, dead, oldestPendingAgeMs, topKeys, truncated: truncated === 1 };
}

/**
 * The samples of a series, oldest first, each with its rate since the one before. An entry that
 * does not parse (written by another version, say) is skipped.
 */
export function decodeSamples(entries: readonly string[]): HistorySample[] {
  const samples: HistorySample[] = [];
  let previous: Decoded | undefined;
  for (const entry of entries) {
    const decoded = decodeSample(entry);
    if (!decoded) continue;
    const { processed, ...sample } = decoded;
    // A counter lower than before was reset (it expired while no ids were processed): no rate.
    if (previous && decoded.at > previous.at && processed >= previous.processed) {
      sample.idsPerSec = ((processed - previous.processed) * 1000) / (decoded.at - previous.at);
    }
    samples.push(sample);
    previous = decoded;
  }
  return samples;
}

/** `history()`: one LRANGE of the capped series, and the Redis clock. */
export async function readHistory(client: RedisClient, names: HistoryNames, name: string): Promise<History> {
  const [entries, at] = await Promise.all([client.lrange(names.series, 0, -1), redisNow(client)]);
  return { name, at, samples: decodeSamples(entries) };
}

/** @internal */
export interface SamplerDeps {
  client: () => RedisClient;
  names: HistoryNames;
  options: ResolvedHistory;
  stats: (options: StatsOptions) => Promise<Stats>;
  /** Calls `count` with the ids of every successful slice of this process; returns the unsubscribe. */
  onProcessed: (count: (ids: number) => void) => () => void;
  logger: Logger;
}

/**
 * One per batcher per process: it samples while at least one of the process's workers of the
 * batcher runs (every worker of a process shares its count and its one tick per interval).
 * @internal
 */
export class HistorySampler {
  private count = 0;
  private sampling = false;
  private timer: NodeJS.Timeout | undefined;
  private unsubscribe: (() => void) | undefined;
  private readonly workers = new Set<Worker>();

  constructor(private readonly deps: SamplerDeps) {}

  /** Starts sampling with the process's first worker; stops once the last one closed. */
  track(worker: Worker): void {
    this.workers.add(worker);
    worker.on('closed', () => {
      this.workers.delete(worker);
      if (this.workers.size === 0) this.stop();
    });
    if (this.timer) return;
    this.unsubscribe = this.deps.onProcessed((ids) => {
      this.count += ids;
    });
    this.timer = setInterval(() => void this.tick(), this.deps.options.intervalMs);
    this.timer.unref();
  }

  /** Ids counted since the last tick are dropped: at most one interval's, from this process. */
  stop(): void {
    clearInterval(this.timer);
    this.timer = undefined;
    this.unsubscribe?.();
    this.unsubscribe = undefined;
  }

  /**
   * One interval's work: one script call, and, for the one process that claims the bucket, a
   * `stats()` read and the append. Resolves true when this call appended the bucket's sample.
   */
  async tick(): Promise<boolean> {
    // A sample still being read (a slow stats() over many keys) takes this tick too; the ids
    // counted meanwhile go with the next one.
    if (this.sampling) return false;
    this.sampling = true;
    const { names, options, logger } = this.deps;
    const count = this.count;
    this.count = 0;
    let added = false;
    try {
      const client = this.deps.client();
      const { claimed, at, processed } = await historyTick(client, names, count, options.intervalMs, options.retentionMs);
      added = true;
      if (!claimed) return false;
      const stats = await this.deps.stats({ top: Math.max(1, options.topKeys) });
      // The last worker closed while this sample was read: it is not appended, so nothing is
      // sampled after a close returned (an append already sent lands before any later read).
      if (!this.timer) return false;
      const sample = encodeSample(at, processed, stats, options.topKeys);
      return await historyAppend(client, names, sample, options.intervalMs, samplesKept(options), options.retentionMs);
    } catch (err) {
      // A tick call that failed most likely never ran: its count goes with the next one (if its
      // reply was lost after it ran, those ids count twice, once).
      if (!added) this.count += count;
      if (!(err instanceof ClosedError)) log(logger, 'warn', 'batch-by-key: history sample failed', { err });
      return false;
    } finally {
      this.sampling = false;
    }
  }
}
