import type { Queue } from 'bullmq';
import { PUSH_ADD_KEYS, queuePrefix, type PushAddKind } from './job-add';

/**
 * BullMQ's moveToFinished keys for a completed job, as its queue prefix (`${prefix}:${queue}:`)
 * followed by each of these, '' standing for the job's id: bullmq
 * `src/classes/redis-queue-backend.ts` `moveToFinishedKeys` and the `KEYS` of
 * `src/commands/moveToFinished-14.lua`. A claim that completes a job derives them in Lua from
 * that prefix (see lua.ts `bullmq-complete`) once the worker has checked they match what its
 * BullMQ builds (engine/claims/backend.ts); else it sends them.
 */
export const BULLMQ_FINISH_KEYS = [
  'wait',
  'active',
  'prioritized',
  'events',
  'stalled',
  'limiter',
  'delayed',
  'paused',
  'meta',
  'pc',
  'completed',
  '',
  'metrics:completed',
  'marker',
] as const;

/**
 * Where BullMQ's moveToFinished arguments (its backend's `moveToCompletedArgs`, flat after the
 * keys, from 0) hold what changes from one completion to the next: bullmq
 * `src/commands/moveToFinished-14.lua` `ARGV[1]` (the job id), `ARGV[2]` (timestamp), `ARGV[6]`
 * (fetch next) and `ARGV[7]` (the queue's key prefix).
 */
export const BULLMQ_FINISH_ARGS = { jobId: 0, timestamp: 1, fetchNext: 5, prefix: 6 } as const;

/**
 * BullMQ's lists a job is in until it ends, as its queue prefix followed by these (a job's own
 * hash is the prefix and its id): bullmq `src/classes/queue-keys.ts`. What a push or an add reads
 * to tell what state the key's job is in (lua.ts `bullmq-job`); derived in Lua only when the
 * installed BullMQ names them so (storage/key-job.ts `queuePrefixOf` checks `queue.keys`).
 */
export const BULLMQ_JOB_LISTS = {
  active: 'active',
  delayed: 'delayed',
  wait: 'wait',
  prioritized: 'prioritized',
  paused: 'paused',
} as const;

/**
 * BullMQ's changeDelay keys, as its queue prefix followed by each of these: bullmq
 * `src/commands/changeDelay-4.lua` `KEYS`. An add of ours sends them when it brings the key's
 * delayed job forward (lua.ts `bullmq-reschedule`).
 */
export const BULLMQ_CHANGE_DELAY_KEYS = ['delayed', 'meta', 'marker', 'events'] as const;

/**
 * The fields of a job's hash we read: its name and data (bullmq `src/classes/job.ts` `asJSON`),
 * when it ended (`finishedOn`), its priority, and where BullMQ's stalled check leaves the failure
 * it defers to the job's next fetch (`src/commands/moveStalledJobsToWait-8.lua`, `defa`): the
 * worker that fetches such a job fails it without running it (`src/classes/worker.ts`).
 */
export const BULLMQ_JOB_FIELDS = {
  name: 'name',
  data: 'data',
  finishedOn: 'finishedOn',
  priority: 'priority',
  deferredFailure: 'defa',
} as const;

/**
 * BullMQ's reply to a fetch (moveToActive's, and a completion's that fetched the next job), from
 * 0: the job's hash as HGETALL returns it, then its id (bullmq
 * `src/commands/includes/prepareJobForProcessing.lua`, then `limitUntil` and `delayUntil`).
 * `carried` is where a fetch of ours adds what it did beside (a key job's first claim), after
 * BullMQ's own four (lua.ts `bullmqCarry`).
 */
export const BULLMQ_FETCH_REPLY = { fields: 0, jobId: 1, carried: 4 } as const;

/** The id of the job a fetch reply (see `BULLMQ_FETCH_REPLY`) fetched, and what the fetch carried beside it, if anything. */
export function fetchReplyOf(reply: unknown): { jobId: string; carried: unknown } | undefined {
  if (!Array.isArray(reply) || reply[BULLMQ_FETCH_REPLY.carried] === undefined) return undefined;
  return { jobId: String(reply[BULLMQ_FETCH_REPLY.jobId]), carried: reply[BULLMQ_FETCH_REPLY.carried] };
}

/**
 * How BullMQ scores its sorted sets: a prioritized job by its priority times `priority` (bullmq
 * `src/commands/includes/addJobWithPriority.lua`, a counter below), a delayed job by its due time
 * (ms) times `delayed` (`src/commands/includes/getDelayedScore.lua`, a counter below).
 */
export const BULLMQ_SCORES = { priority: 0x100000000, delayed: 0x1000 } as const;

/**
 * BullMQ's keys a queue's load is read from (storage's queue-load.lua): its wait list, active
 * list, delayed set and prioritized set, and the prefix of a job's hash, from bullmq's own
 * `queue.keys` and `queue.toKey` (`src/classes/queue-base.ts`), never spelled here.
 */
export interface QueueLists {
  wait: string;
  active: string;
  delayed: string;
  prioritized: string;
  /** A job's hash is this followed by its id. */
  jobPrefix: string;
}

/** A queue's `QueueLists`. */
export function queueListsOf(queue: Pick<Queue, 'keys' | 'toKey'>): QueueLists {
  const keys = queue.keys;
  return { wait: keys.wait!, active: keys.active!, delayed: keys.delayed!, prioritized: keys.prioritized!, jobPrefix: queuePrefix(queue) };
}

/** A queue's lists as a script's KEYS, in the order the `bullmq-load` Lua include reads them (`bullmqLoadLists`). */
export function queueLoadKeys(lists: QueueLists): string[] {
  return [lists.wait, lists.active, lists.delayed, lists.prioritized, lists.jobPrefix];
}

/**
 * Whether BullMQ's add call (its keys, as its backend built them) uses the keys a push derives
 * in Lua from the queue prefix (`PUSH_ADD_KEYS`, lua.ts `bullmqKeys`).
 */
export function addKeysDerivable(add: { kind: PushAddKind; call: { keys: readonly string[] } }, queuePrefix: string): boolean {
  const names = PUSH_ADD_KEYS[add.kind];
  return add.call.keys.length === names.length && names.every((name, i) => add.call.keys[i] === queuePrefix + name);
}
