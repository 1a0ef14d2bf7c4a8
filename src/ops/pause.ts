import { describe, InvalidOptionError, NotPausedError } from '../core/errors';
import { validateKey } from '../core/input';
import type { KeyLevel, KeyQueue } from '../storage/job';
import { KeyJobs } from '../storage/key-job';
import type { Keyspace } from '../storage/keys';
import { MAX_TIMER_MS } from '../core/limits';
import { duration, onlyKnownOptions, optionNames } from '../core/validate';
import { Cluster } from 'ioredis';
import { dueIn, pauseKey, resumeKey } from '../storage/protocol';
import { listForRecovery } from '../storage/batcher-protocol';
import type { RedisClient } from '../storage/scripts';
import { redisNow } from './stats';
import type { Fill } from '../core/fill';
import type { Key, PausedKey, PauseOptions, StoreKind } from '../core/types';

/**
 * Operators' pause of one key. The key's `paused` marker (in its own slot) is the truth every
 * claim, push and release reads (see includes/flow.lua); the batcher's paused index lists keys
 * for `paused()`. On a standalone server a pause or a resume writes both in one script call, so
 * the two never disagree, whatever runs at the same moment. On a Cluster they are in different
 * slots: the marker is written first, the index after it, and the recovery sweep lists a paused
 * key whose entry a concurrent resume dropped (see recovery.ts).
 */

/** @internal */
export interface PauseDeps {
  client: RedisClient;
  keyspace: Keyspace;
  /** The queue of the key's shard. */
  queue: (key: Key) => KeyQueue;
  store: StoreKind;
  /** The key's wait to fill (see core/fill.ts): a resumed key's job waits for it. */
  fill: (key: Key) => Fill | undefined;
  /** The level of a key's job (a resumed key's is light: a wait is no turn; see engine/scheduling.ts). */
  level: KeyLevel;
  /** The recovery index of the key's shard (a Cluster's pause lists the key there; see `pause`). */
  index: (key: Key) => string;
}

/** Ms the pause lasts (undefined: until resumed), from the options; throws before anything is written. */
function pauseLength(options: PauseOptions, now: number): number | undefined {
  if (typeof options !== 'object' || options === null)
    throw new InvalidOptionError(`pause options must be an object, got ${describe(options)}`);
  onlyKnownOptions('pause options', options, optionNames<PauseOptions>()(['untilMs', 'forMs']));
  const { untilMs, forMs } = options;
  if (untilMs !== undefined && forMs !== undefined) throw new InvalidOptionError('pause takes untilMs or forMs, not both');
  if (forMs !== undefined) return duration('pause forMs', forMs, 0);
  if (untilMs !== undefined) {
    if (typeof untilMs !== 'number' || !Number.isInteger(untilMs) || untilMs <= now || untilMs - now > MAX_TIMER_MS) {
      throw new InvalidOptionError(
        `pause untilMs is a time (ms since the epoch) in the future, at most ${MAX_TIMER_MS} ms away; got ${describe(untilMs)} ` +
          '(for a duration, pass forMs)',
      );
    }
    return untilMs - now;
  }
  return undefined;
}

export async function pause(deps: PauseDeps, rawKey: Key, options: PauseOptions = {}): Promise<void> {
  const key = validateKey(rawKey, 'key');
  const ms = pauseLength(options, Date.now());
  const { client, keyspace } = deps;
  const names = keyspace.forKey(key);
  if (!(client instanceof Cluster)) {
    await pauseKey(client, names, key, ms, keyspace.pausedIndex);
    return;
  }
  // The recovery index lists the key too: its sweep re-lists a paused key whose paused-index entry
  // a concurrent resume dropped, and it reads only the keys its index lists.
  await listForRecovery(client, deps.index(key), key);
  const untilMs = await pauseKey(client, names, key, ms);
  await client.zadd(keyspace.pausedIndex, untilMs ?? '+inf', key);
}

/** Ends the pause and, if the key has ids, starts (or brings forward) its job; a NotPausedError if it is not paused (a timed pause that ended is not). */
export async function resume(deps: PauseDeps, rawKey: Key): Promise<void> {
  const key = validateKey(rawKey, 'key');
  const { client, keyspace } = deps;
  const names = keyspace.forKey(key);
  const fill = deps.fill(key);
  const cluster = client instanceof Cluster;
  const wasPaused = await resumeKey(client, names, key, cluster ? undefined : keyspace.pausedIndex);
  if (cluster) await client.zrem(keyspace.pausedIndex, key);
  if (!wasPaused) throw new NotPausedError(`key ${JSON.stringify(key)} is not paused`);
  // A key paused until resumed has no job (its last run completed it); a timed one waits delayed.
  const due = await dueIn(client, deps.store, names, fill);
  if (due >= 0) await new KeyJobs(client, deps.queue).ensure(key, due, deps.level(key, 'light'));
}

/** Index entries read per page by `paused()`; each page's markers are read in one round trip (standalone). */
const PAUSED_PAGE = 1_000;

/**
 * Keys paused now, by the end of their pause (those until resumed last); entries of timed pauses
 * that ended are dropped on the way. Paged: one read of the index and one of the markers per
 * 1,000 keys, so many paused keys never stall the caller (a worker's history sample reads this).
 */
export async function paused(deps: PauseDeps): Promise<PausedKey[]> {
  const { client, keyspace } = deps;
  // Ended timed pauses, by the Redis clock (the index's scores are).
  await client.zremrangebyscore(keyspace.pausedIndex, '-inf', await redisNow(client));
  const listed: PausedKey[] = [];
  for (let start = 0; ; start += PAUSED_PAGE) {
    const flat = await client.zrange(keyspace.pausedIndex, start, start + PAUSED_PAGE - 1, 'WITHSCORES');
    const page: PausedKey[] = [];
    for (let i = 0; i < flat.length; i += 2) {
      const score = flat[i + 1] as string;
      page.push({ key: flat[i] as string, ...(score !== 'inf' && { untilMs: Number(score) }) });
    }
    // The marker is the truth: a pause whose marker write never landed is not listed.
    const markers = page.map((p) => keyspace.forKey(p.key).paused);
    const live = await markersExist(client, markers);
    listed.push(...page.filter((_, i) => live[i]));
    if (flat.length < 2 * PAUSED_PAGE) return listed;
  }
}

/** Which of these keys exist: one pipeline on a standalone server; on a Cluster (any slots), one call each. */
async function markersExist(client: RedisClient, keys: readonly string[]): Promise<boolean[]> {
  if (client instanceof Cluster) return Promise.all(keys.map(async (key) => (await client.exists(key)) === 1));
  const pipeline = client.pipeline();
  for (const key of keys) pipeline.exists(key);
  const replies = (await pipeline.exec()) ?? [];
  return replies.map(([err, n]) => {
    if (err) throw err;
    return n === 1;
  });
}
