import { Cluster, type Redis } from 'ioredis';
import { queuePrefix } from '../bullmq';
import { JOB_NAME, type KeyLevel, type KeyQueue } from '../storage/job';
import { KeyJobs } from '../storage/key-job';
import { jobPointerOf, keyOfJobPointer, type Keyspace } from '../storage/keys';
import { log } from '../core/logger';
import type { TicketOutbox } from '../storage/ticket-outbox';
import { forgetDeadPointers, forgetKey } from '../storage/batcher-protocol';
import type { RedisClient } from '../storage/scripts';
import { backlog, type Store } from '../storage/store';
import type { ShardQueues } from '../storage/shard-queues';
import type { Key, Logger } from '../core/types';

/** Index entries read per page of a sweep. */
const SWEEP_PAGE = 1000;
/** Entries looked at concurrently within a page. */
const SWEEP_CONCURRENCY = 50;
/**
 * A sweep reads page after page until no entry is older than its cutoff, or this long has passed:
 * bounded work per sweep, yet a batcher with more new keys per interval than one page still gets
 * its drained keys out of the index (each entry looked at is either dropped or moved to now).
 */
const SWEEP_BUDGET_MS = 5_000;

/** @internal */
export interface RecoveryDeps {
  /** For the callbacks of settled tickets a crashed worker left in a key's outbox. */
  tickets: TicketOutbox;
  client: RedisClient;
  /**
   * The shard counts processes use (see agreement.ts recordedShardCounts): the recovery indexes
   * of all are swept, and a key's job on the key's shard of any of them counts as its job.
   */
  counts: () => Promise<readonly number[]>;
  /** A stranded key's job goes to its shard of this batcher's own count. */
  shards: ShardQueues;
  keyspace: Keyspace;
  store: Store;
  /** Entries younger than this are left alone: their pusher is still adding the job. */
  graceMs: number;
  /** The TTL a key lock without one gets (see sweepOne). */
  lockTtlMs: number;
  /** The level of a key's job (a stranded key's is light, as a newcomer's; see scheduling.ts). */
  level: KeyLevel;
  logger: Logger;
}

/**
 * The states BullMQ's getState gives a job where a worker will fetch it or is running it. A job
 * whose hash outlived its place in BullMQ's lists is 'unknown', and covers nothing.
 */
const LIVE = new Set(['waiting', 'prioritized', 'delayed', 'active']);

/**
 * Whether the key's job pointer on one of `queues` names a job of the key's that a worker will
 * run (see storage/scripts/includes/key-job.lua): ours, with the key in its data (after an
 * obliterate a pointer can name another key's job), and in one of BullMQ's lists.
 */
async function hasLiveJob(client: RedisClient, queues: readonly KeyQueue[], key: string): Promise<boolean> {
  for (const queue of queues) {
    const jobId = await client.get(jobPointerOf(queuePrefix(queue), key));
    if (jobId === null) continue;
    const job = await queue.getJob(jobId);
    if (job?.name === JOB_NAME && job.data?.key === key && LIVE.has(await job.getState())) return true;
  }
  return false;
}

/**
 * Finds keys that have ids but no job and adds one: the path back for a pusher that died
 * between storing ids and adding the job, or a job that failed or was removed. Keys with
 * nothing left are dropped from the index. Returns how many keys got a job.
 */
export async function recoverStrandedKeys(deps: RecoveryDeps): Promise<number> {
  const { client } = deps;
  const cutoff = Date.now() - deps.graceMs;
  const stopAt = Date.now() + SWEEP_BUDGET_MS;
  const counts = await deps.counts();
  const keyJobs = new KeyJobs(client, (key) => deps.shards.of(key));
  let recovered = 0;
  for (const index of deps.shards.indexes(counts)) {
    while (Date.now() < stopAt) {
      const flat = await client.zrangebyscore(index, '-inf', cutoff, 'WITHSCORES', 'LIMIT', 0, SWEEP_PAGE);
      if (flat.length === 0) break;
      for (let i = 0; i < flat.length; i += 2 * SWEEP_CONCURRENCY) {
        const entries = [];
        for (let j = i; j < Math.min(flat.length, i + 2 * SWEEP_CONCURRENCY); j += 2)
          entries.push(sweepOne(deps, keyJobs, counts, index, flat[j] as string, flat[j + 1] as string));
        recovered += (await Promise.all(entries)).filter(Boolean).length;
      }
    }
  }
  if (recovered > 0) log(deps.logger, 'info', 'batch-by-key: re-enqueued keys that had ids but no job', { recovered });
  return recovered;
}

/** Names read per SCAN call of the full sweep and of the walk. */
const SCAN_COUNT = 1000;

/**
 * SCAN calls per Redis node per sweep of the walk: a sweep runs twice per recoveryIntervalMs, so
 * the walk reads about 2 × WALK_CALLS × SCAN_COUNT names of each node per interval (10,000).
 * @internal (docs/failures-and-flow.md quotes it)
 */
export const WALK_CALLS = 5;

/**
 * Lists `keys` in their recovery indexes as oldest (score 0, NX: an entry listed already keeps its
 * time), so that the sweep that follows looks at each.
 */
async function listKeys(deps: Pick<RecoveryDeps, 'client' | 'shards'>, keys: Iterable<Key>): Promise<void> {
  const byIndex = new Map<string, (string | number)[]>();
  for (const key of keys) {
    const { index } = deps.shards.forKey(key);
    let members = byIndex.get(index);
    if (!members) byIndex.set(index, (members = []));
    members.push(0, key);
  }
  await Promise.all([...byIndex].map(([index, members]) => deps.client.zadd(index, 'NX', ...members)));
}

/** A Redis node's name for the walk's cursors. */
function nodeId(node: Redis): string {
  return `${node.options.host ?? ''}:${node.options.port ?? ''}`;
}

/**
 * The recovery sweep's walk over everything in Redis, a bounded stretch per sweep (WALK_CALLS SCAN
 * calls per node), resumed where the last one stopped: the way back, without an operator, for
 * what BullMQ's own operations leave behind.
 * - A key with ids whose job was removed through BullMQ (`job.remove()`, bull-board's remove,
 *   `queue.clean`, `drain`, `obliterate`), evicted or deleted by hand is listed nowhere (a push
 *   that adds its key's job does not list it): every key with a name in Redis is listed, and the
 *   sweep that follows adds a job to those that have ids but no job.
 * - A job pointer that names no live job of its key's (its job ended through BullMQ's own
 *   completion, or is gone) is deleted (forget-pointers.lua), and its key listed.
 * So a stranded key runs within one recoveryIntervalMs per 2 × WALK_CALLS × SCAN_COUNT names on
 * its node (docs/failures-and-flow.md). One walk per batcher in a process; its cursors live here.
 */
export class KeyspaceWalk {
  private readonly cursors = new Map<string, string>();

  async step(deps: RecoveryDeps): Promise<void> {
    const { client } = deps;
    const nodes: Redis[] = client instanceof Cluster ? client.nodes('master') : [client];
    const prefixes = deps.shards.all(await deps.counts()).map(queuePrefix);
    await Promise.all(nodes.map((node) => this.walkNode(deps, node, prefixes)));
  }

  private async walkNode(deps: RecoveryDeps, node: Redis, queuePrefixes: readonly string[]): Promise<void> {
    const id = nodeId(node);
    let cursor = this.cursors.get(id) ?? '0';
    for (let call = 0; call < WALK_CALLS; call++) {
      const [next, names] = await node.scan(cursor, 'COUNT', SCAN_COUNT);
      cursor = next;
      await this.look(deps, names, queuePrefixes);
      if (cursor === '0') break;
    }
    this.cursors.set(id, cursor);
  }

  /** Lists the keys `names` belong to, and deletes the dead pointers among them. */
  private async look(deps: RecoveryDeps, names: readonly string[], queuePrefixes: readonly string[]): Promise<void> {
    const keys = new Set<Key>();
    const pointers = new Map<string, { name: string; key: Key }[]>();
    for (const name of names) {
      const key = deps.keyspace.keyOfName(name);
      if (key !== undefined) {
        keys.add(key);
        continue;
      }
      for (const queuePrefix of queuePrefixes) {
        const pointed = keyOfJobPointer(queuePrefix, name);
        if (pointed === undefined) continue;
        let ofQueue = pointers.get(queuePrefix);
        if (!ofQueue) pointers.set(queuePrefix, (ofQueue = []));
        ofQueue.push({ name, key: pointed });
        break;
      }
    }
    const gone = await Promise.all([...pointers].map(([queuePrefix, found]) => forgetDeadPointers(deps.client, queuePrefix, found)));
    for (const key of gone.flat()) keys.add(key);
    if (keys.size > 0) await listKeys(deps, keys);
  }
}

/**
 * The full sweep's first half: lists in its recovery index every key that has any name in Redis
 * (a SCAN of the batcher's key names, on every master of a Cluster), so that the sweep that
 * follows looks at each. The way back for keys no path listed: a key whose job an operator
 * removed by hand (a push that adds its key's job lists it nowhere). Listed as oldest (score 0,
 * NX: an entry listed already keeps its time). Returns how many keys it found.
 */
export async function listEveryKey(deps: Pick<RecoveryDeps, 'client' | 'keyspace' | 'shards'>): Promise<number> {
  const { client, keyspace } = deps;
  const nodes = client instanceof Cluster ? client.nodes('master') : [client];
  const found = new Set<string>();
  for (const node of nodes) {
    let cursor = '0';
    do {
      const [next, names] = await node.scan(cursor, 'MATCH', keyspace.keyNamesPattern, 'COUNT', SCAN_COUNT);
      cursor = next;
      const fresh = new Set<Key>();
      for (const name of names) {
        const key = keyspace.keyOfName(name);
        if (key === undefined || found.has(key)) continue;
        found.add(key);
        fresh.add(key);
      }
      await listKeys(deps, fresh);
    } while (cursor !== '0');
  }
  return found.size;
}

/** Looks at one index entry: drops a drained key, adds a job to a stranded one (true), moves the rest behind. */
async function sweepOne(
  deps: RecoveryDeps,
  keyJobs: KeyJobs,
  counts: readonly number[],
  index: string,
  key: string,
  seenScore: string,
): Promise<boolean> {
  const { client, keyspace } = deps;
  const names = keyspace.forKey(key);
  const [{ pending, inFlight, retrying }, lockTtl, pausedTtl, outbox] = await Promise.all([
    backlog(client, deps.store, names),
    client.pttl(names.lock),
    client.pttl(names.paused),
    client.llen(names.settledTickets),
  ]);
  const locked = lockTtl !== -2;
  // A lock with no TTL was set by hand (ours always have one): it would block the key for ever,
  // every push counting it as covered. It gets a TTL; a run that does hold it renews it anyway.
  if (lockTtl === -1) await repairLock(deps, key, names.lock);
  if (outbox > 0) await deps.tickets.drain(key, names);
  if (!pending && !inFlight && !retrying && !locked) {
    await forgetKey(client, index, key, seenScore);
    return false;
  }
  // A paused key missing from the paused index (a resume that raced a pause on a Cluster, where
  // the two are written apart): listed again, with the pause's end (the marker holds it).
  if (pausedTtl !== -2) await relistPaused(deps, key, names.paused, pausedTtl);
  let recovered = false;
  // Slices in flight and no run: a first claim recovers them, those of lanes other than 0 only
  // while the key is marked (keys.ts `lanes`), which a run of an earlier version did not set. The
  // mark is one of the key's extras, so the extras mark comes with it (includes/extras.lua).
  if (inFlight && !locked) await client.mset(names.lanes, '1', names.extras, '1');
  // A run holds the key, or a job waits for it (delayed for a backoff or a zset time), or it is
  // paused until resumed (resume adds its job): fine.
  if (!locked && pausedTtl !== -1 && !(await hasLiveJob(client, deps.shards.ofKeyIn(counts, key), key))) {
    await keyJobs.ensure(key, 0, deps.level(key, 'light'));
    recovered = true;
  }
  // Either way the key moves behind the others (past the cutoff), so busy keys never hide the rest.
  await client.zadd(index, 'XX', Date.now(), key);
  return recovered;
}

async function repairLock(deps: RecoveryDeps, key: string, lock: string): Promise<void> {
  log(deps.logger, 'warn', 'batch-by-key: a key lock had no TTL (set by hand?); it expires in lockTtlMs', {
    key,
    lock,
    lockTtlMs: deps.lockTtlMs,
  });
  await deps.client.pexpire(lock, deps.lockTtlMs);
}

async function relistPaused(deps: RecoveryDeps, key: string, marker: string, pttl: number): Promise<void> {
  const { client, keyspace } = deps;
  if ((await client.zscore(keyspace.pausedIndex, key)) !== null) return;
  const value = await client.get(marker);
  if (value === null) return;
  await client.zadd(keyspace.pausedIndex, 'NX', pttl === -1 || value === '' ? '+inf' : value, key);
}
