import { createRedisBackend, raw2NextJobData, type BackendFactory, type Job, type QueueBaseOptions, type RedisQueueBackend } from 'bullmq';

export type { BackendFactory, QueueBaseOptions, RedisQueueBackend };

/**
 * BullMQ's own Redis backend of a queue or worker (bullmq `createRedisBackend`, its
 * `src/classes/redis-queue-backend.ts`): what a `BackendFactory` of ours starts from and hooks
 * (see fused-path.ts).
 */
export function redisBackend(name: string, opts: QueueBaseOptions, options?: Parameters<BackendFactory>[2]): RedisQueueBackend {
  return createRedisBackend(name, opts, options);
}

/**
 * The result BullMQ's completion returns, read from a raw moveToFinished reply (bullmq
 * `raw2NextJobData`): the next job it fetched, if any, as BullMQ's worker loop takes it.
 */
export function nextJobData(reply: unknown[]): ReturnType<typeof raw2NextJobData> {
  return raw2NextJobData(reply);
}

/**
 * Why `backend` lacks what the functions below hook or call (named after BullMQ's member), or
 * undefined: a BullMQ whose backend changed shape gets its own, unhooked.
 */
export function backendProblem(backend: RedisQueueBackend): string | undefined {
  const members = backend as unknown as Record<string, unknown>;
  for (const method of ['execCommand', 'moveToCompleted', 'moveToCompletedArgs']) {
    if (typeof members[method] !== 'function') return `its Redis backend has no ${method}()`;
  }
  if (!Array.isArray(members.moveToFinishedKeys)) return 'its Redis backend has no moveToFinishedKeys';
  if (typeof raw2NextJobData !== 'function') return 'it exports no raw2NextJobData';
  return undefined;
}

/** Sends one of BullMQ's scripts, as the backend would have: `command` is its name. */
type Send = () => unknown;

/**
 * Routes every script call of `backend` (its `execCommand`: `moveToActive`, `moveToFinished`, the
 * adds, …) through `route`, which may send it (`send`) or answer it itself. Replaces the method
 * on this backend object alone.
 */
export function routeCommands(backend: RedisQueueBackend, route: (command: string, args: unknown[], send: Send) => unknown): void {
  const exec = backend.execCommand.bind(backend);
  backend.execCommand = (client, command, args: unknown[]) => route(command, args, () => exec(client, command, args));
}

/** What BullMQ's worker gets back from completing a job: the next job's data, and the completion time. */
export type Completion = ReturnType<RedisQueueBackend['moveToCompleted']>;

/**
 * Lets `answer` give the result of a job's completion (the backend's `moveToCompleted`, which
 * BullMQ's worker calls once a processor returns) without sending it, when the completion was
 * already made elsewhere; `undefined` from `answer` sends it as usual.
 */
export function answerCompletions(backend: RedisQueueBackend, answer: (job: { id?: string }) => Completion | undefined): void {
  const complete = backend.moveToCompleted.bind(backend);
  backend.moveToCompleted = (job, ...rest) => answer(job) ?? complete(job, ...rest);
}

/**
 * BullMQ's moveToFinished call that would complete `job` (the backend's `moveToCompletedArgs`):
 * its keys, then its arguments, flat, and how many of them are keys.
 */
export function completionCall(
  backend: RedisQueueBackend,
  job: Job,
  removeOnComplete: Job['opts']['removeOnComplete'],
  token: string,
  fetchNext: boolean,
): { flat: unknown[]; keys: number } {
  return {
    flat: backend.moveToCompletedArgs(job, undefined, removeOnComplete ?? false, token, fetchNext),
    keys: backend.moveToFinishedKeys.length,
  };
}
