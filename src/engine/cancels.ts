import { aroundCancels, type Worker } from '../bullmq';
import type { CancelSource } from '../core/stop';

/**
 * What stops a job's run from outside (a worker closing, a lost BullMQ job lock, `cancelJob`):
 * BullMQ's AbortSignal for the job, or, on a worker made by `createWorker`, a `JobCancel` from
 * this module. BullMQ builds an AbortController per job for any processor that declares a third
 * parameter: a one-id key's run paid about 4 % of its worker CPU for it (a CPU profile of the
 * one-id-keys bench), though a run only polls its cancellation between slices (see Stop). So
 * createWorker's processor declares two, and the worker's cancelJob and cancelAllJobs reach its
 * runs through `JobCancels`.
 */

/** One running job's cancellation: aborted once, with a reason. */
class JobCancel implements CancelSource {
  aborted = false;
  reason: unknown = undefined;
  private listeners: (() => void)[] | undefined;

  addEventListener(_type: 'abort', listener: () => void): void {
    if (this.aborted) return;
    (this.listeners ??= []).push(listener);
  }

  cancel(reason: unknown): void {
    if (this.aborted) return;
    this.aborted = true;
    this.reason = reason;
    const listeners = this.listeners;
    this.listeners = undefined;
    for (const listener of listeners ?? []) listener();
  }
}

/** The cancellations of the jobs one worker is running, by job id. */
export class JobCancels {
  private readonly running = new Map<string, JobCancel>();
  private worker: Pick<Worker, 'closing' | 'isPaused'> | undefined;

  /**
   * The cancellation of a job whose run starts now; `close` it when the run ends. On a worker
   * already closing or paused it is cancelled from the start: a job fetched while `close()` or
   * `pause()` began (a completion's next job, a fused fetch in flight) missed their cancelAllJobs,
   * and would otherwise run its whole budget while the close waits for it.
   */
  open(jobId: string): CancelSource {
    const cancel = new JobCancel();
    this.running.set(jobId, cancel);
    if (this.worker?.closing) cancel.cancel('worker closing');
    else if (this.worker?.isPaused()) cancel.cancel('worker pausing');
    return cancel;
  }

  close(jobId: string): void {
    this.running.delete(jobId);
  }

  /** Cancels a running job's run (it stops after its current slice); false when none runs here. */
  private cancel(jobId: string, reason: unknown): boolean {
    const cancel = this.running.get(jobId);
    cancel?.cancel(reason);
    return cancel !== undefined;
  }

  private cancelAll(reason: unknown): void {
    for (const cancel of this.running.values()) cancel.cancel(reason);
  }

  /**
   * Makes the worker's cancelJob and cancelAllJobs (attach's, on close and on a lost job lock, and
   * any caller's) reach the runs of this worker, whose processor takes no BullMQ signal.
   */
  serve(worker: Pick<Worker, 'cancelJob' | 'cancelAllJobs' | 'closing' | 'isPaused'>): void {
    this.worker = worker;
    aroundCancels(worker, { cancelJob: (jobId, reason) => this.cancel(jobId, reason), cancelAllJobs: (reason) => this.cancelAll(reason) });
  }
}
