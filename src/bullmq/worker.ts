import type { Worker } from 'bullmq';
import type { Redis } from 'ioredis';

/**
 * Makes BullMQ's worker loop look for a job before it blocks again. BullMQ sets its private
 * `drained` when a fetch finds no job, and while it is set waits for the queue's marker before
 * each fetch: a fetch of ours that returns nothing after that wait took the marker (no slot
 * was free) would leave the job waiting for a new marker, up to drainDelay (bullmq
 * `src/classes/worker.ts`, `_getNextJob` and `nextJobFromJobData`; test/bullmq-internals.test.ts).
 */
export function markNotDrained(worker: Worker): void {
  (worker as unknown as { drained: boolean }).drained = false;
}

/**
 * Makes BullMQ's worker loop fetch at once when it runs again, rather than block first. A pause
 * disconnects the worker's blocking wait for the queue's marker, and BullMQ takes that failed
 * wait to mean "nothing due until Infinity": its next wait would block its longest (10 s on
 * Redis, `maximumBlockTimeout`), though a delayed job, whose marker an earlier wait took, came due
 * meanwhile. A fetch promotes due delayed jobs and tells the loop when the next one is due (bullmq
 * `src/classes/worker.ts`, `waitForJob`, `getBlockTimeout` and `updateDelays`; test/worker.pause.test.ts).
 */
export function fetchBeforeBlocking(worker: Worker): void {
  markNotDrained(worker);
  (worker as unknown as { blockUntil: number }).blockUntil = 0;
}

/**
 * The raw blocking connection of a worker's backend (bullmq `RedisQueueBackend.blockingClient`),
 * which its close disconnects first; undefined without one.
 */
export async function blockingClientOf(worker: Worker): Promise<Redis | undefined> {
  const backend = (worker as unknown as { backend?: { blockingClient?: Promise<Redis> } }).backend;
  return backend?.blockingClient?.catch(() => undefined);
}

/**
 * The connections a worker's backend opened itself (bullmq `RedisQueueBackend.client` and
 * `blockingClient`): its blocking one always, its command one unless it is the client passed as
 * the worker's `connection` (the caller's to close).
 */
export async function ownClientsOf(worker: Worker): Promise<Redis[]> {
  const backend = (worker as unknown as { backend?: { client?: Promise<Redis> } }).backend;
  const main = await backend?.client?.catch(() => undefined);
  const blocking = await blockingClientOf(worker);
  return [...(main && main !== (worker.opts.connection as unknown) ? [main] : []), ...(blocking ? [blocking] : [])];
}

/**
 * Wraps one worker object's `close` (the user's own, from `attach`, included): `around` gets
 * BullMQ's close to call. Replaces the method on this object alone.
 */
export function aroundClose(worker: Worker, around: (close: (force?: boolean) => Promise<void>, force?: boolean) => Promise<void>): void {
  const close = worker.close.bind(worker);
  worker.close = (force?: boolean) => around(close, force);
}

/**
 * Makes one worker object's `cancelJob` and `cancelAllJobs` (which BullMQ calls itself on close
 * and on a lost job lock) reach `cancels` first; BullMQ's own run as well, for the jobs whose
 * processor took its AbortSignal. Replaces the methods on this object alone.
 */
export function aroundCancels(
  worker: Pick<Worker, 'cancelJob' | 'cancelAllJobs'>,
  cancels: { cancelJob(jobId: string, reason?: string): boolean; cancelAllJobs(reason?: string): void },
): void {
  const cancelJob = worker.cancelJob.bind(worker);
  const cancelAllJobs = worker.cancelAllJobs.bind(worker);
  worker.cancelJob = (jobId, reason) => cancels.cancelJob(jobId, reason) || cancelJob(jobId, reason);
  worker.cancelAllJobs = (reason) => {
    cancels.cancelAllJobs(reason);
    cancelAllJobs(reason);
  };
}
