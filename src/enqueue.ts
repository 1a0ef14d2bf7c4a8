import { currentKey } from './context';
import { describe, InvalidOptionError, MissingKeyError } from './errors';
import { normalizeIds, validateKey } from './input';
import { ensureJob, type KeyQueue } from './job';
import { Cluster, type ChainableCommander } from 'ioredis';
import { encodeKey, type KeyNames, type Keyspace } from './keys';
import { queueScript, type RedisClient } from './scripts';
import { dueIn, type Store } from './store';
import { createTicket, newTicket } from './progress';
import type { BatchByKeyOptions, Id, Key, PerformOptions, PerformResult } from './types';

/** Ids per Redis command: large enough for few round trips, small enough not to block Redis. */
const PUSH_CHUNK = 1000;

/** @internal */
export interface EnqueueDeps {
  client: RedisClient;
  queue: () => KeyQueue;
  keyspace: Keyspace;
  store: Store;
  resolver: BatchByKeyOptions['key'];
  /** How long a ticket of a tracked push lives. */
  ticketTtlMs: number;
  /** Fair scheduling: a new key's job whose first push fits in one slice goes to the front of the wait list. */
  fair: boolean;
  sliceSize: number;
}

/**
 * Validates everything, then writes the ids in one transaction and makes sure a job serves the
 * key. Unless the transaction shows a waiting job that will claim them, the job is added after the
 * ids are stored, deduplicated by key with `keepLastIfActive`: if the key's job is finishing right
 * now, BullMQ keeps this add and starts it when that job ends, so no push is left without a job
 * (no lost wakeup). An active job is never trusted: it may be between its last (empty) claim and
 * its completion, and the add, which BullMQ keeps as the next job, is what covers that window.
 */
export async function performBatchLater(
  deps: EnqueueDeps,
  rawIds: ReadonlyArray<Id | number>,
  options: PerformOptions = {},
): Promise<PerformResult> {
  const ids = normalizeIds(rawIds);
  const delayMs = validateDelay(deps.store, options.delayMs);
  const track = validateTrack(options.track);
  const key = await resolveKey(deps.resolver, options.key);
  const ticket = track ? newTicket(key) : undefined;
  if (ids.length === 0) {
    if (ticket) await createTicket(deps.client, deps.keyspace.forKey(key), ticket, deps.ticketTtlMs);
    return { key, pushed: 0, ...(ticket && { ticket: ticket.ticket }) };
  }

  const { client } = deps;
  const names = deps.keyspace.forKey(key);
  const zset = deps.store.kind === 'zset';
  const cluster = client instanceof Cluster;
  // Outside a Cluster the push is one transaction, which also tells whether the key's job will
  // see these ids without an add. On a Cluster the index and BullMQ's keys
  // sit in other slots than the key's data, so they are separate commands.
  const tx = cluster ? client.pipeline() : client.multi();
  // The index of keys with recent pushes (for recovery) is written first, so stored ids are always findable.
  if (cluster) await client.zadd(deps.keyspace.index, Date.now(), key);
  else tx.zadd(deps.keyspace.index, Date.now(), key);
  const probe = !cluster && !zset;
  if (probe) {
    const queue = deps.queue();
    queueScript(tx, 'job-waits', [queue.toKey(`de:${encodeKey(key)}`), queue.toKey('active'), queue.toKey('delayed')], []);
  }
  for (let i = 0; i < ids.length; i += PUSH_CHUNK) {
    const chunk = ids.slice(i, i + PUSH_CHUNK);
    // Before the ids on a Cluster pipeline too, so no claim sees a tracked id untracked.
    if (ticket) queueScript(tx, 'track-push', [names.tracked, ticket.hash(names)], [ticket.id, deps.ticketTtlMs, ...chunk]);
    deps.store.push(tx, names, chunk, delayMs);
  }
  deps.store.mark(tx, names, ids.length);
  const stored = await execute(tx);
  const result: PerformResult = { key, pushed: ids.length, ...(ticket && { ticket: ticket.ticket }) };
  // The job probe is the transaction's second reply; 1 means a waiting job will claim these ids.
  if (probe && stored.error === undefined && Number(stored.replies[1]) === 1) return result;

  // Even if a command failed, earlier chunks may have landed: they must have a job all the same.
  const waitMs = zset ? Math.max(0, Number(stored.replies.at(-1))) : 0;
  let error = stored.error;
  // A light newcomer goes ahead of every new key that is still waiting, so a flood split over
  // many new keys (each bigger than a slice) does not hold it back; bigger ones queue FIFO.
  const front = deps.fair && ids.length <= deps.sliceSize;
  await ensureJob(deps.queue(), key, waitMs, front).catch((err: unknown) => (error ??= err));
  if (error !== undefined) throw error;
  if (zset) await bringForward(deps, key, names, waitMs);
  return result;
}

/** Runs a pipeline or transaction; every reply, and the first error (of the call or of any command). */
async function execute(pipeline: ChainableCommander): Promise<{ error?: unknown; replies: unknown[] }> {
  try {
    let error: unknown;
    const replies: unknown[] = [];
    for (const [err, reply] of (await pipeline.exec()) ?? []) {
      if (err) error ??= err;
      replies.push(reply);
    }
    return { error, replies };
  } catch (error) {
    return { error, replies: [] };
  }
}

/** A zset key's job is correct to within this much; closer readings are clock noise. */
const RESCHEDULE_TOLERANCE_MS = 20;

/**
 * Concurrent zset pushes reschedule the key's delayed job last-writer-wins, so a push that read
 * the key before another's earlier id landed can move the job too late. Each pusher reads the
 * key again after its own add and brings the job forward if an id is now ready sooner.
 */
async function bringForward(deps: EnqueueDeps, key: Key, names: KeyNames, waitMs: number): Promise<void> {
  let dueAt = Date.now() + waitMs;
  for (let attempt = 0; attempt < 2; attempt++) {
    const readyIn = await dueIn(deps.client, 'zset', names);
    if (readyIn < 0 || Date.now() + readyIn >= dueAt - RESCHEDULE_TOLERANCE_MS) return;
    dueAt = Date.now() + readyIn;
    await ensureJob(deps.queue(), key, readyIn);
  }
}

function validateTrack(track: unknown): boolean {
  if (track === undefined || typeof track === 'boolean') return track === true;
  throw new InvalidOptionError(`track must be a boolean, got ${describe(track)}`);
}

function validateDelay(store: Store, delayMs: unknown): number {
  if (delayMs === undefined) return 0;
  if (store.kind !== 'zset') {
    throw new InvalidOptionError(`delayMs needs store 'zset'; this batcher uses '${store.kind}'`);
  }
  if (typeof delayMs !== 'number' || !Number.isInteger(delayMs) || delayMs < 0) {
    throw new InvalidOptionError(`delayMs must be an integer >= 0, got ${describe(delayMs)}`);
  }
  return delayMs;
}

async function resolveKey(resolver: BatchByKeyOptions['key'], given: Key | undefined): Promise<Key> {
  if (given !== undefined) return validateKey(given, 'options.key');
  const resolved = resolver ? await resolver() : undefined;
  if (resolved !== undefined) return validateKey(resolved, 'the key resolver (options.key) result');
  const fromContext = currentKey();
  if (fromContext !== undefined) return fromContext;
  throw new MissingKeyError(
    'no key: pass { key } to performBatchLater, set a key resolver in the options, or call it inside withKey(key, fn)',
  );
}
