import type { Queue } from 'bullmq';
import { encodeKey } from './keys';
import type { Key, KeyJobData } from '../core/types';

/** The name of every job this library adds; other names go to the fallback processor. */
export const JOB_NAME = 'batch-by-key';

/** The queue of a batcher's key jobs. */
export type KeyQueue = Queue<KeyJobData, void, string>;

/**
 * Fair scheduling's levels, as BullMQ priorities (see scheduling.ts). Workers take BullMQ's wait
 * list (priority 0) first, FIFO, then the prioritized set by priority, FIFO within one.
 */
export const LEVEL = {
  /** A new job whose first push fits in one slice, and a job lifted by aging: the wait list. */
  light: 0,
  /** A new job whose first push is bigger than a slice. */
  heavy: 1,
  /** A job whose run used its turn (its budget, or its quantum before it was preempted). */
  hadTurn: 2,
} as const;

export type Level = (typeof LEVEL)[keyof typeof LEVEL];

/**
 * BullMQ's key names a batcher reads (push.lua, queue-load.lua), from BullMQ's own `queue.keys`,
 * never spelled here: its wait, active and delayed structures, the prefix of a job's hash, and
 * the deduplication key that holds a key's job id (BullMQ's scripts name it `de` + ':' + id).
 */
export function bullKeysOf(queue: KeyQueue): {
  wait: string;
  active: string;
  delayed: string;
  jobPrefix: string;
  deduplication: (key: Key) => string;
} {
  const keys = queue.keys;
  return {
    wait: keys.wait!,
    active: keys.active!,
    delayed: keys.delayed!,
    jobPrefix: queue.toKey(''),
    deduplication: (key) => `${keys.de!}:${encodeKey(key)}`,
  };
}

/**
 * Adds the key's job at `level` unless one exists. An existing delayed job (backing off, or
 * waiting for a zset time) is moved to `delayMs`: for new ids that are ready now, that brings it
 * forward.
 */
export async function ensureJob(queue: KeyQueue, key: Key, delayMs: number, level: Level = LEVEL.light): Promise<void> {
  await queue.add(
    JOB_NAME,
    { key },
    {
      deduplication: { id: encodeKey(key), keepLastIfActive: true, reschedule: true },
      delay: delayMs,
      ...(level !== LEVEL.light && { priority: level }),
      // Retries are ours, per slice; a run never fails for a slice.
      attempts: 1,
      removeOnComplete: true,
      removeOnFail: { count: 1000 },
    },
  );
}
