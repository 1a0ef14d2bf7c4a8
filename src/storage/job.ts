import type { Queue } from '../bullmq';
import { JOB_NAME } from './keys';
import { isHighKey } from '../core/priority';
import type { Key, KeyJobData, Logger, Priority } from '../core/types';

export { JOB_NAME } from './keys';

/** The queue of a batcher's key jobs. */
export type KeyQueue = Queue<KeyJobData, void, string>;

/**
 * Fair scheduling's levels, as BullMQ priorities (see scheduling.ts). Workers take BullMQ's wait
 * list (priority 0) first, FIFO, then the prioritized set by priority, FIFO within one. The wait
 * list is the first level, where aging lifts jobs. Without `priority(key)` it is the light keys'
 * level too; a batcher with one ranks its keys: the wait list is its high keys' lane, before
 * every normal key's, and its normal keys' levels are one further down (see `LEVELS`).
 */
export const WAIT_LIST = 0;

/** A level of a key that `priority(key)` does not make high. */
export type LevelName = 'light' | 'heavy' | 'hadTurn';

/** A BullMQ priority: `WAIT_LIST` or one of `LEVELS`'. */
export type Level = number;

/** Normal keys' levels, without (`plain`) and with `priority(key)` (`ranked`). */
const LEVELS: Readonly<Record<'plain' | 'ranked', Readonly<Record<LevelName, Level>>>> = {
  /**
   * `light`: a new job whose first push fits in one slice, or one back from a wait; `heavy`: a new
   * job whose first push is bigger than a slice; `hadTurn`: a job whose run used its turn (its
   * budget, or its quantum before it was preempted).
   */
  plain: { light: WAIT_LIST, heavy: 1, hadTurn: 2 },
  ranked: { light: 1, heavy: 2, hadTurn: 3 },
};

/** A batcher's normal keys' levels: ranked when it has `priority(key)`. */
export function levelsOf(priority: ((key: Key) => Priority) | undefined): Readonly<Record<LevelName, Level>> {
  return priority ? LEVELS.ranked : LEVELS.plain;
}

/** A batcher's levels in BullMQ's prioritized set, from the first: what aging looks at. */
export function prioritizedLevels(priority: ((key: Key) => Priority) | undefined): Level[] {
  return Object.values(levelsOf(priority)).filter((level) => level !== WAIT_LIST);
}

/**
 * A batcher's level of a key's job: `priority(key)`'s high keys (when it has one) wait in the
 * wait list whatever `level`, the others at `level` of their batcher's levels.
 */
export type KeyLevel = (key: Key, level: LevelName) => Level;

export function keyLevels(priority: ((key: Key) => Priority) | undefined, logger: Logger): KeyLevel {
  const levels = levelsOf(priority);
  return (key, level) => (isHighKey(key, priority, logger) ? WAIT_LIST : levels[level]);
}

/** The states a key's job is in until it ends (a paused queue's jobs count as waiting). */
export const LIVE_STATES = ['waiting', 'prioritized', 'delayed', 'active'] as const;

/** The keys of up to `limit` key jobs on `queue` that have not ended (each job's data is read). */
export async function liveJobKeys(queue: KeyQueue, limit: number): Promise<Key[]> {
  const jobs = await queue.getJobs([...LIVE_STATES], 0, limit - 1, true);
  return jobs.flatMap((job) => (job?.name === JOB_NAME && typeof job.data?.key === 'string' ? [job.data.key] : []));
}
