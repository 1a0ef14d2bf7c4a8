import { createRedisBackend, type BackendFactory, type QueueBaseOptions, type RedisQueueBackend, type Worker } from 'bullmq';
import { bullmqCall, type BullmqCall } from '../storage/protocol';
import type { KeyJob } from '../core/types';

/**
 * Completes a run's BullMQ job in the claim that ends the run, one round trip instead of two.
 *
 * A run of a few ids is three calls: the claim that takes them, the claim that acks them and,
 * finding nothing left, drops the lock, and BullMQ's moveToFinished (which fetches the next
 * job). The last two become one: the claim runs BullMQ's own moveToFinished script, inlined
 * (see includes/finish-job.lua), with the keys and arguments this worker's backend builds for
 * it. When the processor then returns, BullMQ completes the job as usual, and the backend
 * answers that moveToFinished with the claim's reply instead of sending it: BullMQ reads it
 * as its own (the next job, or an error code) and emits its events as usual.
 *
 * Only for workers made by `createWorker` on a standalone Redis: on a Cluster BullMQ's keys sit
 * in another slot than the key's, and a worker of the user's own (`processor()`) has BullMQ's
 * default backend. Either way the run completes as before.
 */
export class JobFinisher {
  private backend: RedisQueueBackend | undefined;
  private worker: Worker | undefined;
  /** moveToFinished replies of jobs completed by a claim, by job id, until BullMQ asks. */
  private readonly replies = new Map<string, unknown>();

  /** A BullMQ backend factory: BullMQ's Redis backend, whose moveToFinished takes our replies. */
  factory(cluster: boolean): BackendFactory<RedisQueueBackend> {
    return (name: string, opts: QueueBaseOptions, options?: Parameters<BackendFactory>[2]) => {
      const backend = createRedisBackend(name, opts, options);
      if (cluster) return backend;
      const exec = backend.execCommand.bind(backend);
      backend.execCommand = (client, command, args: unknown[]) => {
        // moveToFinished's arguments after its keys begin with the job id.
        const jobId = command === 'moveToFinished' ? String(args[backend.moveToFinishedKeys.length]) : undefined;
        if (jobId !== undefined && this.replies.has(jobId)) {
          const reply = this.replies.get(jobId);
          this.replies.delete(jobId);
          return Promise.resolve(reply);
        }
        return exec(client, command, args) as unknown;
      };
      this.backend = backend;
      return backend;
    };
  }

  /** The worker whose backend this is (its closing and paused state decide whether to fetch a next job). */
  serve(worker: Worker): void {
    this.worker = worker;
  }

  /** BullMQ's moveToFinished call for a job of this worker, or undefined when it cannot be finished in a claim. */
  callFor(job: KeyJob, token: string): BullmqCall | undefined {
    const { backend, worker } = this;
    if (!backend || !worker || !job.id || !token) return undefined;
    // BullMQ fetches a next job only for a worker that is neither closing nor paused.
    const fetchNext = !(worker.closing || worker.isPaused());
    const flat = backend.moveToCompletedArgs(job, undefined, job.opts.removeOnComplete ?? false, token, fetchNext);
    return bullmqCall(flat, backend.moveToFinishedKeys.length);
  }

  /** The claim completed the job: BullMQ's own moveToFinished for it gets this reply. */
  completed(jobId: string, reply: unknown): void {
    this.replies.set(jobId, reply);
  }
}
