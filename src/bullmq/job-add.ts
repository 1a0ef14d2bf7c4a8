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
