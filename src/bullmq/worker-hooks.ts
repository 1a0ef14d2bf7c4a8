import { Worker, type Job } from 'bullmq';
import { markNotDrained } from './worker';

/**
 * A BullMQ Worker with two named extension points around what its loop does with a job (bullmq
 * `src/classes/worker.ts`: the protected `moveToActive`, and `processJob`, which also makes the
 * completion that fetches the next job): a subclass says whether and how each fetch goes, and
 * what happens around each job's processing, without overriding BullMQ's members itself.
 */
export abstract class HookedWorker<D, R> extends Worker<D, R, string> {
  /**
   * Around each fetch under `token`: `fetch` is BullMQ's; a hook that returns undefined without
   * calling it skips this fetch (BullMQ's loop asks again).
   */
  protected abstract aroundFetch(
    token: string,
    fetch: () => Promise<Job<D, R, string> | undefined>,
  ): Promise<Job<D, R, string> | undefined>;

  /**
   * Around each job's processing under `token`: `process` is BullMQ's, given whether the job's
   * completion may fetch a next job besides BullMQ's own rule; it resolves to that next job, if any.
   */
  protected abstract aroundProcess(
    job: Job<D, R, string>,
    token: string,
    process: (mayFetchNext: () => boolean) => Promise<void | Job<D, R, string>>,
  ): Promise<void | Job<D, R, string>>;

  protected override async moveToActive(token: string, name?: string): Promise<Job<D, R, string>> {
    let fetched = false;
    const job = await this.aroundFetch(token, () => {
      fetched = true;
      return super.moveToActive(token, name);
    });
    // A fetch skipped may have followed BullMQ's blocking wait, which took the queue's marker:
    // left drained, the next fetch would block for a new marker (up to drainDelay) while a job waits.
    if (!job && !fetched) markNotDrained(this);
    // BullMQ's own resolves to undefined when it finds no job, whatever its type says, and its loop takes it so.
    return job as Job<D, R, string>;
  }

  override processJob(
    job: Job<D, R, string>,
    token: string,
    fetchNextCallback: () => boolean = () => true,
  ): Promise<void | Job<D, R, string>> {
    return this.aroundProcess(job, token, (mayFetchNext) => super.processJob(job, token, () => fetchNextCallback() && mayFetchNext()));
  }
}
