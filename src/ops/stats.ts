import { describe, InvalidOptionError } from '../core/errors';
import { integer } from '../core/validate';
import type { Keyspace } from '../storage/keys';
import type { RedisClient } from '../storage/scripts';
import { readKeys, type Store } from '../storage/store';
import type { KeyStats, PausedKey, Stats, StatsOptions } from '../core/types';

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
  deadCount: () => Promise<number>;
  pausedKeys: () => Promise<PausedKey[]>;
}

/** Redis server time in ms: zset scores and push marks are by this clock, so lag must be too. */
export async function redisNow(client: RedisClient): Promise<number> {
  const [seconds, micros] = await client.time();
  return Number(seconds) * 1000 + Math.floor(Number(micros) / 1000);
}

/**
 * Reads the batcher's index of keys with recent pushes in pages (never a SCAN) and each key's
 * counts and oldest push mark, all O(1) reads but the retry slices (at most a few per key).
 */
export async function stats(deps: StatsDeps, options: StatsOptions = {}): Promise<Stats> {
  if (typeof options !== 'object' || options === null)
    throw new InvalidOptionError(`stats options must be an object, got ${describe(options)}`);
  const maxKeys = integer('stats maxKeys', options.maxKeys, STATS_DEFAULTS.maxKeys, 1, MAX_KEYS);
  const top = integer('stats top', options.top, STATS_DEFAULTS.top, 1, 1000);
  const { client, keyspace, store } = deps;
  const [now, dead, indexed, paused] = await Promise.all([
    redisNow(client),
    deps.deadCount(),
    client.zcard(keyspace.index),
    deps.pausedKeys(),
  ]);
  const keys: KeyStats[] = [];
  let scanned = 0;
  while (scanned < Math.min(maxKeys, indexed)) {
    const page = await client.zrange(keyspace.index, scanned, Math.min(scanned + PAGE, maxKeys) - 1);
    if (page.length === 0) break;
    scanned += page.length;
    const read = await readKeys(
      client,
      store,
      page.map((key) => keyspace.forKey(key)),
    );
    for (const [i, { pending, inFlight, retrying, pendingSince }] of read.entries()) {
      const key = page[i]!;
      if (pending + inFlight + retrying === 0) continue;
      const oldestPendingAgeMs = pending > 0 && pendingSince !== undefined ? Math.max(0, now - pendingSince) : 0;
      keys.push({ key, pending, inFlight, retrying, oldestPendingAgeMs });
    }
  }
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
    truncated: indexed > maxKeys,
    paused,
  };
}
