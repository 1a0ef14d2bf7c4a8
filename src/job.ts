import type { Queue } from 'bullmq';
import { encodeKey } from './keys';
import type { Key, KeyJobData } from './types';

/** The name of every job this library adds; other names go to the fallback processor. */
export const JOB_NAME = 'batch-by-key';

/** The queue of a batcher's key jobs. */
export type KeyQueue = Queue<KeyJobData, void, string>;

/**
 * Adds the key's job unless one exists. An existing delayed job (backing off, or waiting for a
 * zset time) is moved to `delayMs`: for new ids that are ready now, that brings it forward.
 * With `front` (fair scheduling's light new keys) a new job goes to the front of the wait list.
 */
export async function ensureJob(queue: KeyQueue, key: Key, delayMs: number, front = false): Promise<void> {
  await queue.add(
    JOB_NAME,
    { key },
    {
      deduplication: { id: encodeKey(key), keepLastIfActive: true, reschedule: true },
      delay: delayMs,
      lifo: front,
      // Retries are ours, per slice; a run never fails for a slice.
      attempts: 1,
      removeOnComplete: true,
      removeOnFail: { count: 1000 },
    },
  );
}
