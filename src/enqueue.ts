import { currentKey } from './context';
import { describe, InvalidOptionError, MissingKeyError } from './errors';
import { normalizeIds, validateKey } from './input';
import { ensureJob, type KeyQueue } from './job';
import type { Keyspace } from './keys';
import type { RedisClient } from './scripts';
import type { Store } from './store';
import type { BatchByKeyOptions, Id, Key, PerformOptions, PerformResult } from './types';

/** Ids per Redis command: large enough for few round trips, small enough not to block Redis. */
export const PUSH_CHUNK = 1000;

/** @internal */
export interface EnqueueDeps {
  client: RedisClient;
  queue: () => KeyQueue;
  keyspace: Keyspace;
  store: Store;
  resolver: BatchByKeyOptions['key'];
}

/**
 * Validates everything, then writes the ids in one pipelined round trip and makes sure a job
 * serves the key. The job is added after the ids are stored and deduplicated by key with
 * `keepLastIfActive`: if the key's job is finishing right now, BullMQ keeps this add and starts
 * it when that job ends, so no push is left without a job (no lost wakeup).
 */
export async function performBatchLater(
  deps: EnqueueDeps,
  rawIds: ReadonlyArray<Id | number>,
  options: PerformOptions = {},
): Promise<PerformResult> {
  const ids = normalizeIds(rawIds);
  const delayMs = validateDelay(deps.store, options.delayMs);
  const key = await resolveKey(deps.resolver, options.key);
  if (ids.length === 0) return { key, pushed: 0 };

  const names = deps.keyspace.forKey(key);
  const pipeline = deps.client.pipeline();
  for (let i = 0; i < ids.length; i += PUSH_CHUNK) {
    deps.store.push(pipeline, names, ids.slice(i, i + PUSH_CHUNK), delayMs);
  }
  // The index lists keys with recent pushes for recovery; it lives in another Cluster slot,
  // so it is a separate command, sent along with the pipeline.
  const [, replies] = await Promise.all([deps.client.zadd(deps.keyspace.index, Date.now(), key), pipeline.exec()]);
  let last: unknown = 0;
  for (const [err, reply] of replies ?? []) {
    if (err) throw err;
    last = reply;
  }
  const waitMs = deps.store.kind === 'zset' ? Number(last) : 0;
  await ensureJob(deps.queue(), key, waitMs, deps.store.kind === 'zset');
  return { key, pushed: ids.length };
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
