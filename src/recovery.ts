import { ensureJob, type KeyQueue } from './job';
import { encodeKey, type Keyspace } from './keys';
import { log } from './logger';
import { runScript, type RedisClient } from './scripts';
import { backlog, type Store } from './store';
import type { Logger } from './types';

/** Index entries looked at per sweep: bounded work however many keys there are. */
const SWEEP_LIMIT = 1000;

/** @internal */
export interface RecoveryDeps {
  client: RedisClient;
  queue: () => KeyQueue;
  keyspace: Keyspace;
  store: Store;
  /** Entries younger than this are left alone: their pusher is still adding the job. */
  graceMs: number;
  logger: Logger;
}

const FINISHED = new Set(['completed', 'failed', 'unknown']);

async function hasLiveJob(queue: KeyQueue, key: string): Promise<boolean> {
  const jobId = await queue.getDeduplicationJobId(encodeKey(key));
  return jobId !== null && !FINISHED.has(await queue.getJobState(jobId));
}

/**
 * Finds keys that have ids but no job and adds one: the path back for a pusher that died
 * between storing ids and adding the job, or a job that failed or was removed. Keys with
 * nothing left are dropped from the index. Returns how many keys got a job.
 */
export async function recoverStrandedKeys(deps: RecoveryDeps): Promise<number> {
  const { client, keyspace } = deps;
  const cutoff = Date.now() - deps.graceMs;
  const flat = await client.zrangebyscore(keyspace.index, '-inf', cutoff, 'WITHSCORES', 'LIMIT', 0, SWEEP_LIMIT);
  let recovered = 0;
  for (let i = 0; i < flat.length; i += 2) {
    const key = flat[i] as string;
    const seenScore = flat[i + 1] as string;
    const names = keyspace.forKey(key);
    const [{ pending, inFlight, retrying }, locked] = await Promise.all([backlog(client, deps.store, names), client.exists(names.lock)]);
    if (!pending && !inFlight && !retrying && !locked) {
      await runScript(client, 'forget-key', [keyspace.index], [key, seenScore]);
      continue;
    }
    // A run holds the key, or a job waits for it (delayed for a backoff or a zset time): fine.
    if (!locked && !(await hasLiveJob(deps.queue(), key))) {
      await ensureJob(deps.queue(), key, 0);
      recovered++;
    }
    // Either way the key moves behind the others, so busy keys never hide the rest from the sweep.
    await client.zadd(keyspace.index, 'XX', Date.now(), key);
  }
  if (recovered > 0) log(deps.logger, 'info', 'batch-by-key: re-enqueued keys that had ids but no job', { recovered });
  return recovered;
}
