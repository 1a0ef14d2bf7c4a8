import type { JobCancels } from './cancels';
import { PLAIN_CLAIMS, type ClaimTransport } from './claims/transport';
import { KeyRun, type Shed } from './key-run';
import type { RunEnv } from './run-env';
import { runTicketCallback } from './ticket-callback';
import { processorWithoutSignal, processorWithSignal, UnrecoverableError } from '../bullmq';
import { describe } from '../core/errors';
import { log } from '../core/logger';
import type { CancelSource } from '../core/stop';
import { JOB_NAME } from '../storage/job';
import { TICKET_JOB_NAME } from '../storage/ticket-outbox';
import type { FallbackProcessor, Key, KeyJob, KeyProcessor } from '../core/types';

/**
 * The BullMQ processor of a batcher: a key job is one `KeyRun` (key-run.ts), a ticket's callback
 * job runs its callback (ticket-callback.ts), and with `fallback` any other job is the caller's.
 */
export function keyProcessor(env: RunEnv, fallback?: FallbackProcessor): KeyProcessor {
  // The signal reaches a fallback processor, and a run cancelled by BullMQ (its lost lock, its close).
  return processorWithSignal(async function processKeyJob(job, token, signal): Promise<void> {
    // A job of the caller's that took our name, its data not a key's, is theirs too.
    if (fallback && !(job.name === TICKET_JOB_NAME || (job.name === JOB_NAME && keyOf(job.data) !== undefined))) {
      await fallback(job, token, signal);
      return;
    }
    return runJob(env, PLAIN_CLAIMS, job, token ?? '', signal);
  });
}

/**
 * `createWorker`'s processor: BullMQ hands it no signal, so builds no AbortController per job
 * (see cancels.ts); the worker's cancelJob and cancelAllJobs reach its runs through `cancels`,
 * its runs make their first and last claims through `claims` (fused into BullMQ's fetch and
 * completion when the worker's backend is: see claims/fused.ts), and ask `shed` before each slice
 * whether a lowered concurrency sends them away (see shard-worker.ts).
 */
export function workerKeyProcessor(env: RunEnv, cancels: JobCancels, claims: ClaimTransport, shed: Shed): KeyProcessor {
  return processorWithoutSignal(async function processKeyJob(job, token): Promise<void> {
    const id = job.id!;
    const cancel = cancels.open(id);
    try {
      return await runJob(env, claims, job, token ?? '', cancel, shed);
    } finally {
      cancels.close(id);
    }
  });
}

/** The key of a key job's data; undefined for anything else (a caller's job that took our name). */
function keyOf(data: unknown): Key | undefined {
  const key: unknown = typeof data === 'object' && data !== null ? (data as { key?: unknown }).key : undefined;
  return typeof key === 'string' ? key : undefined;
}

async function runJob(
  env: RunEnv,
  claims: ClaimTransport,
  job: KeyJob,
  token: string,
  cancel: CancelSource | undefined,
  shed?: Shed,
): Promise<void> {
  if (job.name === TICKET_JOB_NAME) {
    const { onTicketSettled, sliceTimeoutMs, logger } = env.options;
    return runTicketCallback(env.outbox.deps, job, token, cancel, onTicketSettled, { timeoutMs: sliceTimeoutMs, logger });
  }
  // BullMQ's job hash is gone (an eviction, an operator's DEL) while its id stayed in a list: the
  // fetch finds a job with no name and no data. Nothing to run, and no key to name (the key, if
  // it has ids, is found by the recovery sweep): said at warn, and the husk completes.
  // (BullMQ reads its data as `{}` then; every job added has a name.)
  if ((job.name as string | undefined) === undefined) {
    const message = `batch-by-key: job ${job.id} has no name and no data (its hash was removed, its id left in BullMQ's lists); nothing to run`;
    log(env.options.logger, 'warn', message, { jobId: job.id });
    return;
  }
  if (job.name !== JOB_NAME) throw new Error(`batch-by-key: no processor for job name ${JSON.stringify(job.name)}`);
  // A job of the caller's named like ours: a null data failed with a TypeError, a number ran as a
  // key. Unrecoverable: no attempt of it can do better.
  if (keyOf(job.data) === undefined) {
    const data: unknown = job.data;
    const got = typeof data === 'object' && data !== null ? `key ${describe((data as { key?: unknown }).key)}` : describe(data);
    throw new UnrecoverableError(
      `batch-by-key: job ${job.id} is named ${JSON.stringify(JOB_NAME)} but its data has no string key (got ${got}): ` +
        'a job of yours on this queue needs another name',
    );
  }
  // A worker on another store than the pushers' must touch nothing: the job fails (logged),
  // the ids stay, and the recovery sweep tries again once the deployment is fixed.
  await env.agree();
  await new KeyRun(env, claims, job, token, cancel, shed).run();
}
