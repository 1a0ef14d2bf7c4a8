import { Job, type JobsOptions, type Queue } from 'bullmq';

/**
 * Runs BullMQ's `Job.addJob` for a new job of `queue` against a client that sends nothing: each
 * script call BullMQ would make reaches `runCommand` (its command name, `addStandardJob:<sha>` and
 * the like, and its keys and arguments flat), whose promise answers it. So BullMQ alone decides
 * which add script a job takes and builds its arguments, and a script of ours can make that add
 * inside its own call (storage/job.ts). Mirrors bullmq `src/classes/job.ts` `addJob`, which calls
 * `scripts.addJob(client, …)` and, through it, the backend's `runCommand`. Resolves when BullMQ
 * has read the answer.
 */
export function buildAdd<Data, Name extends string>(
  queue: Queue<Data, void, Name>,
  name: Name,
  data: Data,
  opts: JobsOptions,
  runCommand: (command: string, flat: unknown[]) => Promise<unknown>,
): Promise<unknown> {
  const job = new Job(queue, name, data, opts);
  return job.addJob({ runCommand } as unknown as Parameters<typeof job.addJob>[0]);
}

/**
 * The keys of BullMQ's adds a push may make inside its own script call, each the queue's prefix
 * followed by one of these, in BullMQ's order: as bullmq `src/classes/redis-queue-backend.ts`
 * `addStandardJobArgs` and `addDelayedJobArgs` build them from `queue.keys`. A push derives
 * them in Lua, and only where the installed BullMQ built exactly these (storage/job.ts `pushAdd`).
 */
export const PUSH_ADD_KEYS = {
  standard: ['wait', 'paused', 'meta', 'id', 'completed', 'delayed', 'active', 'events', 'marker'],
  delayed: ['marker', 'meta', 'id', 'delayed', 'completed', 'events'],
} as const;

/** Which of BullMQ's adds a push makes in its own call (see `PUSH_ADD_KEYS`). */
export type PushAddKind = keyof typeof PUSH_ADD_KEYS;
