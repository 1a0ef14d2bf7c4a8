import type { JobCancels } from './cancels';
import type { JobFinisher } from './finisher';
import { KeyRun, type Shed } from './key-run';
import type { RunEnv } from './run-env';
import { runTicketCallback } from './ticket-callback';
import type { CancelSource } from '../core/stop';
import { JOB_NAME } from '../storage/job';
import { TICKET_JOB_NAME } from '../storage/ticket-outbox';
import type { FallbackProcessor, KeyJob, KeyProcessor } from '../core/types';

/**
 * The BullMQ processor of a batcher: a key job is one `KeyRun` (key-run.ts), a ticket's callback
 * job runs its callback (ticket-callback.ts), and with `fallback` any other job is the caller's.
 */
export function keyProcessor(env: RunEnv, fallback?: FallbackProcessor): KeyProcessor {
  // Three declared parameters: BullMQ hands a cancellation signal only to processors of arity >= 3.
  return async function processKeyJob(job, token, signal): Promise<void> {
    if (fallback && job.name !== JOB_NAME && job.name !== TICKET_JOB_NAME) {
      await fallback(job, token, signal);
      return;
    }
    return runJob(env, undefined, job, token ?? '', signal);
  };
}

/**
 * `createWorker`'s processor: two declared parameters, so BullMQ builds no AbortController per
 * job (see cancels.ts); the worker's cancelJob and cancelAllJobs reach its runs through `cancels`,
 * its runs complete their jobs in their last claim through `finisher` (see finisher.ts), and ask
 * `shed` before each slice whether a lowered concurrency sends them away (see shard-worker.ts).
 */
export function workerKeyProcessor(env: RunEnv, cancels: JobCancels, finisher: JobFinisher, shed: Shed): KeyProcessor {
  return async function processKeyJob(job, token): Promise<void> {
    const id = job.id!;
    const cancel = cancels.open(id);
    try {
      return await runJob(env, finisher, job, token ?? '', cancel, shed);
    } finally {
      cancels.close(id);
    }
  };
}

async function runJob(
  env: RunEnv,
  finisher: JobFinisher | undefined,
  job: KeyJob,
  token: string,
  cancel: CancelSource | undefined,
  shed?: Shed,
): Promise<void> {
  if (job.name === TICKET_JOB_NAME) {
    const { onTicketSettled, sliceTimeoutMs, logger } = env.options;
    return runTicketCallback(env.outbox.deps, job, token, cancel, onTicketSettled, { timeoutMs: sliceTimeoutMs, logger });
  }
  if (job.name !== JOB_NAME) throw new Error(`batch-by-key: no processor for job name ${JSON.stringify(job.name)}`);
  // A worker on another store than the pushers' must touch nothing: the job fails (logged),
  // the ids stay, and the recovery sweep tries again once the deployment is fixed.
  await env.agree();
  await new KeyRun(env, finisher, job, token, cancel, shed).run();
}
