import type { Queue } from 'bullmq';
import { encodeKey } from './keys';
import type { Key, KeyJobData } from './types';

/** The name of every job this library adds; other names go to the fallback processor. */
export const JOB_NAME = 'batch-by-key';

/** The queue of a batcher's key jobs. */
export type KeyQueue = Queue<KeyJobData, void, string>;

/**
 * Adds the key's job unless one exists. With `reschedule` (zset), an existing delayed job is
 * moved to `delayMs`, the time the earliest pending id is ready.
 */
export async function ensureJob(queue: KeyQueue, key: Key, delayMs: number, reschedule: boolean): Promise<void> {
  await queue.add(
    JOB_NAME,
    { key },
    {
      deduplication: { id: encodeKey(key), keepLastIfActive: true, ...(reschedule ? { reschedule: true } : {}) },
      delay: delayMs,
      // Retries are ours (per slice, with a failure count that resets on success), not BullMQ's.
      attempts: 1,
      removeOnComplete: true,
      removeOnFail: { count: 1000 },
    },
  );
}
