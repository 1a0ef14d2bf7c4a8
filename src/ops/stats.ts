import { describe, InvalidOptionError } from '../core/errors';
import { integer } from '../core/validate';
import type { Keyspace } from '../storage/keys';
import type { RedisClient } from '../storage/scripts';
import { readKeys, type KeyReading, type Store } from '../storage/store';
import type { GlobalLimitsStats, Key, KeyStats, PausedKey, Stats, StatsOptions } from '../core/types';

/**
 * Index entries read per page, their reads pipelined. Small enough that a page's replies take a
 * few ms to handle: a worker process that samples history (see history.ts) must not stall its runs.
 */
const PAGE = 100;
const MAX_KEYS = 1_000_000;
const STATS_DEFAULTS = { maxKeys: 10_000, top: 10 } as const;

/** @internal */
export interface StatsDeps {
  name: string;
  client: RedisClient;
  keyspace: Keyspace;
  store: Store;
  /** The recovery indexes of every shard (see storage/shards.ts): keys that may have ids but no job. */
  indexes: () => Promise<readonly string[]>;
  /** The keys of up to `limit` key jobs that have not ended, on every shard's queue (a push that adds its key's job lists it nowhere else). */
  jobKeys: (limit: number) => Promise<readonly Key[]>;
  deadCount: () => Promise<number>;
  pausedKeys: () => Promise<PausedKey[]>;
  limits: () => Promise<GlobalLimitsStats>;
}

/** Redis server time in ms: zset scores and push marks are by this clock, so lag must be too. */
export async function redisNow(client: RedisClient): Promise<number> {
  const [seconds, micros] = await client.time();
  return Number(seconds) * 1000 + Math.floor(Number(micros) / 1000);
}

/** A key's reading as `stats()` lists it: its lag is its oldest pending id's age by the Redis clock `now`. */
function keyStatsOf(key: Key, { pending, inFlight, retrying, pendingSince }: KeyReading, now: number): KeyStats {
  const oldestPendingAgeMs = pending > 0 && pendingSince !== undefined ? Math.max(0, now - pendingSince) : 0;
  return { key, pending, inFlight, retrying, oldestPendingAgeMs };
}

/**
 * These keys' backlogs and lag, as `stats()` reads each (a drained key too, all zeros), and `at`,
 * the Redis clock they were read by: the clock and one batch of reads, sent together.
 */
export async function readKeyStats(
  deps: Pick<StatsDeps, 'client' | 'keyspace' | 'store'>,
  keys: readonly Key[],
): Promise<{ at: number; keys: KeyStats[] }> {
  const { client, keyspace, store } = deps;
  const [at, read] = await Promise.all([
    redisNow(client),
    readKeys(
      client,
      store,
      keys.map((key) => keyspace.forKey(key)),
    ),
  ]);
  return { at, keys: read.map((reading, i) => keyStatsOf(keys[i]!, reading, at)) };
}

/**
 * Reads the batcher's recovery indexes (one per shard) in pages (never a SCAN), then the keys of
 * the key jobs that have not ended, and each key's counts and oldest push mark, all O(1) reads but
 * the retry slices (at most a few per key). A key listed twice (in two indexes, its shard changed
 * with the shard count, or in an index and by its job) counts once.
 */
export async function stats(deps: StatsDeps, options: StatsOptions = {}): Promise<Stats> {
  if (typeof options !== 'object' || options === null)
    throw new InvalidOptionError(`stats options must be an object, got ${describe(options)}`);
  const maxKeys = integer('stats maxKeys', options.maxKeys, STATS_DEFAULTS.maxKeys, 1, MAX_KEYS);
  const top = integer('stats top', options.top, STATS_DEFAULTS.top, 1, 1000);
  const { client, keyspace, store } = deps;
  const indexes = await deps.indexes();
  const [now, dead, sizes, paused, limits] = await Promise.all([
    redisNow(client),
    deps.deadCount(),
    Promise.all(indexes.map((index) => client.zcard(index))),
    deps.pausedKeys(),
    deps.limits(),
  ]);
  const indexed = sizes.reduce((sum, n) => sum + n, 0);
  const keys: KeyStats[] = [];
  const seen = new Set<string>();
  let scanned = 0;
  // `scanned` counts index entries read, and keys of jobs not listed in an index.
  const readPage = async (listed: readonly Key[], counted: 'entries' | 'new keys') => {
    // Marked seen as it is taken: a key twice in one page (its jobs on the queues of two shard
    // counts, both listed by jobKeys) is read once.
    const page: Key[] = [];
    for (const key of listed) {
      if (seen.has(key)) continue;
      seen.add(key);
      page.push(key);
    }
    scanned += counted === 'entries' ? listed.length : page.length;
    const read = await readKeys(
      client,
      store,
      page.map((key) => keyspace.forKey(key)),
    );
    for (const [i, reading] of read.entries()) {
      if (reading.pending + reading.inFlight + reading.retrying > 0) keys.push(keyStatsOf(page[i]!, reading, now));
    }
  };
  for (const [n, index] of indexes.entries()) {
    for (let start = 0; start < sizes[n]! && scanned < maxKeys;) {
      const listed = await client.zrange(index, start, start + Math.min(PAGE, maxKeys - scanned) - 1);
      if (listed.length === 0) break;
      start += listed.length;
      await readPage(listed, 'entries');
    }
  }
  const room = maxKeys - scanned;
  const byJob = room > 0 ? await deps.jobKeys(room) : [];
  for (let start = 0; start < byJob.length; start += PAGE) await readPage(byJob.slice(start, start + PAGE), 'new keys');
  const sum = (field: 'pending' | 'inFlight' | 'retrying') => keys.reduce((total, k) => total + k[field], 0);
  const first = (compare: (a: KeyStats, b: KeyStats) => number, list = keys) => [...list].sort(compare).slice(0, top);
  return {
    name: deps.name,
    at: now,
    keys: keys.length,
    pending: sum('pending'),
    inFlight: sum('inFlight'),
    retrying: sum('retrying'),
    dead,
    oldestPendingAgeMs: keys.reduce((max, k) => Math.max(max, k.oldestPendingAgeMs), 0),
    topKeys: first((a, b) => b.pending + b.retrying - (a.pending + a.retrying) || b.inFlight - a.inFlight),
    laggingKeys: first(
      (a, b) => b.oldestPendingAgeMs - a.oldestPendingAgeMs,
      keys.filter((k) => k.pending > 0),
    ),
    scannedKeys: scanned,
    // With room left, a full read of job keys may have left some out.
    truncated: indexed > maxKeys || (room > 0 && byJob.length >= room),
    paused,
    limits,
  };
}
