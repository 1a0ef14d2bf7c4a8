import type { Job, Worker } from '../bullmq';
import { log } from '../core/logger';
import type { Key, Logger } from '../core/types';
import { JOB_NAME } from '../storage/job';
import { closeBounded } from './worker-close';

/** @internal */
export interface AttachDeps {
  logger: Logger;
  /**
   * The batcher's recoveryIntervalMs: the aging sweep and the shard check run once per interval;
   * the recovery sweep twice, each looking at entries listed over a quarter of an interval ago
   * (see workers.ts), so that a key listed at any moment is looked at within one interval.
   */
  intervalMs: number;
  /** The batcher's `shutdownTimeoutMs`: a worker's close waits for Redis that long and `CLOSE_REDIS_WAIT_MS` more (see worker-close.ts). */
  shutdownTimeoutMs: number;
  /** Throws a ClosedError once the batcher is closed (see attach). */
  assertOpen: () => void;
  /** Lists a key in its recovery index: its job failed, so its ids may have no job. */
  listForRecovery: (key: Key) => Promise<unknown>;
  /** The recovery sweep: a job for every key that has ids but neither a job nor a running lock. */
  recover: () => Promise<unknown>;
  /** Fair scheduling's aging sweep (see scheduling.ts); undefined with 'fifo'. */
  age: (() => Promise<unknown>) | undefined;
  /** The history sampler, if the batcher keeps history: it samples while a worker of this process lives. */
  sampler: { track(worker: Worker): void; stop(): void } | undefined;
  /** Brings the shards the workers made here serve up to the recorded shard counts (see shard-worker.ts). */
  serveShards: () => Promise<unknown>;
}

/**
 * What a batcher does for the workers that serve it, whether `createWorker` made them or the
 * caller did (`attach`): logs their errors, stops runs when they close or lose a job's lock, runs
 * the recovery and aging sweeps while they live, and closes the ones it made with the batcher.
 * @internal
 */
export class AttachedWorkers {
  private readonly made = new Set<Worker>();
  private readonly timers = new Set<NodeJS.Timeout>();
  /** The recovery sweep under way, if any: a sweep that outlasts half an interval is not run twice at once. */
  private recovering: Promise<unknown> | undefined;

  constructor(private readonly deps: AttachDeps) {}

  attach(worker: Worker): void {
    const { logger } = this.deps;
    // Its sweep timer would otherwise throw ClosedError from a timer, uncaught.
    this.deps.assertOpen();
    this.stopRunsWith(worker);
    worker.on('error', (err) => log(logger, 'error', 'batch-by-key: worker error', { err }));
    // A failed job may be another job name's (a queue shared through a fallback processor): its data is anything.
    worker.on('failed', (job: Job<{ key?: unknown } | null | undefined> | undefined, err) => {
      log(logger, 'error', 'batch-by-key: job failed; its ids stay pending', { key: job?.data?.key, err });
      // A key's job that failed (its run threw, or BullMQ's stalled check gave up on it) leaves
      // its ids with no job: the recovery sweep adds one.
      const key = job?.name === JOB_NAME ? job.data?.key : undefined;
      if (typeof key === 'string') {
        this.deps
          .listForRecovery(key)
          .catch((listErr: unknown) =>
            log(logger, 'warn', 'batch-by-key: could not list a failed key for recovery', { key, err: listErr }),
          );
      }
    });
    const timers = [setInterval(() => this.sweep(), this.deps.intervalMs), setInterval(() => this.recover(), this.deps.intervalMs / 2)];
    for (const timer of timers) {
      timer.unref();
      this.timers.add(timer);
    }
    worker.on('closed', () => {
      for (const timer of timers) {
        clearInterval(timer);
        this.timers.delete(timer);
      }
    });
    this.deps.sampler?.track(worker);
  }

  /**
   * A worker of another shard under a leader `createWorker` made (see shard-worker.ts): its runs
   * stop as any worker's do; the leader logs its events (it re-emits them) and runs the sweeps.
   */
  follow(worker: Worker): void {
    this.stopRunsWith(worker);
  }

  /** Attaches a worker `createWorker` made, which the batcher's close then closes too. */
  adopt(worker: Worker): void {
    this.attach(worker);
    this.made.add(worker);
    worker.on('closed', () => this.made.delete(worker));
  }

  /** Ends the sweeps and the sampling, and closes the workers made here (their runs stop after their slice). */
  async close(): Promise<void> {
    for (const timer of this.timers) clearInterval(timer);
    this.deps.sampler?.stop();
    await Promise.all([...this.made].map((w) => w.close()));
  }

  private stopRunsWith(worker: Worker): void {
    closeBounded(worker, this.deps.shutdownTimeoutMs);
    // BullMQ waits for running jobs on close; cancelling their signals makes our runs stop
    // after the current slice, release the key and requeue it for another worker at once.
    worker.on('closing', () => worker.cancelAllJobs('worker closing'));
    // BullMQ could not renew a job's lock (a blocked event loop?): another worker may take the
    // job as stalled, so stop our run after its slice instead of running on beside it.
    worker.on('lockRenewalFailed', (jobIds: string[]) => {
      for (const id of jobIds) worker.cancelJob(id, 'BullMQ lost the job lock');
    });
  }

  private sweep(): void {
    const { logger, age, serveShards } = this.deps;
    serveShards().catch((err: unknown) => log(logger, 'warn', 'batch-by-key: could not read the recorded shard counts', { err }));
    age?.().catch((err: unknown) => log(logger, 'warn', 'batch-by-key: aging sweep failed', { err }));
  }

  private recover(): void {
    if (this.recovering) return;
    this.recovering = this.deps
      .recover()
      .catch((err: unknown) => log(this.deps.logger, 'warn', 'batch-by-key: recovery sweep failed', { err }))
      .finally(() => (this.recovering = undefined));
  }
}
