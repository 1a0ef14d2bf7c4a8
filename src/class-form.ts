import { createBatcher } from './batcher';
import { resolveOptions } from './options';
import type {
  Backlog,
  Batcher,
  BatcherEvents,
  History,
  Stats,
  StatsOptions,
  DeadLetters,
  BatchByKeyOptions,
  CreateWorkerOptions,
  FallbackProcessor,
  Id,
  IterationContext,
  Key,
  KeyProcessor,
  PausedKey,
  PauseOptions,
  PerformOptions,
  PerformResult,
  Progress,
  Ticket,
  WaitForOptions,
} from './core/types';
import type { Worker } from 'bullmq';

type JobClass = new () => { eachIteration(ids: Id[], ctx: IterationContext): PromiseLike<unknown> | void };

/**
 * The class form, for people coming from the Ruby concern:
 * `class SegmentRefresher extends BatchByKey({ ... }) { async eachIteration(ids, ctx) {} }`.
 * Each subclass gets its own batcher on first use; one instance serves one job run.
 */
export function BatchByKey(options: Omit<BatchByKeyOptions, 'eachIteration'>) {
  resolveOptions(options); // fail at class definition, not at the first push
  const batchers = new WeakMap<JobClass, Batcher>();
  const batcherOf = (cls: JobClass): Batcher => {
    let batcher = batchers.get(cls);
    if (!batcher) {
      batcher = createBatcher(options, () => {
        const instance = new cls();
        return (ids, ctx) => instance.eachIteration(ids, ctx);
      });
      batchers.set(cls, batcher);
    }
    return batcher;
  };

  abstract class BatchByKeyJob {
    abstract eachIteration(ids: Id[], ctx: IterationContext): PromiseLike<unknown> | void;

    static performBatchLater(this: JobClass, ids: ReadonlyArray<Id | number>, opts?: PerformOptions): Promise<PerformResult> {
      return batcherOf(this).performBatchLater(ids, opts);
    }
    static createWorker(this: JobClass, opts?: CreateWorkerOptions): ReturnType<Batcher['createWorker']> {
      return batcherOf(this).createWorker(opts);
    }
    static processor(this: JobClass, fallback?: FallbackProcessor): KeyProcessor {
      return batcherOf(this).processor(fallback);
    }
    static attach(this: JobClass, worker: Worker): void {
      batcherOf(this).attach(worker);
    }
    static backlog(this: JobClass, key: Key): Promise<Backlog> {
      return batcherOf(this).backlog(key);
    }
    /** The subclass's batcher, for `dashboard` and `prometheusMetrics`. */
    static get batcher(): Batcher {
      return batcherOf(this as unknown as JobClass);
    }
    static stats(this: JobClass, opts?: StatsOptions): Promise<Stats> {
      return batcherOf(this).stats(opts);
    }
    static history(this: JobClass): Promise<History> {
      return batcherOf(this).history();
    }
    static recover(this: JobClass): Promise<number> {
      return batcherOf(this).recover();
    }
    static pause(this: JobClass, key: Key, opts?: PauseOptions): Promise<void> {
      return batcherOf(this).pause(key, opts);
    }
    static resume(this: JobClass, key: Key): Promise<void> {
      return batcherOf(this).resume(key);
    }
    static paused(this: JobClass): Promise<PausedKey[]> {
      return batcherOf(this).paused();
    }
    static pauseAll(this: JobClass): Promise<void> {
      return batcherOf(this).pauseAll();
    }
    static resumeAll(this: JobClass): Promise<void> {
      return batcherOf(this).resumeAll();
    }
    static get deadLetters(): DeadLetters {
      return batcherOf(this as unknown as JobClass).deadLetters;
    }
    static progress(this: JobClass, ticket: Ticket): Promise<Progress> {
      return batcherOf(this).progress(ticket);
    }
    static waitFor(this: JobClass, ticket: Ticket, opts?: WaitForOptions): Promise<Progress> {
      return batcherOf(this).waitFor(ticket, opts);
    }
    static on<E extends keyof BatcherEvents>(this: JobClass, event: E, listener: (...args: BatcherEvents[E]) => void): void {
      batcherOf(this).on(event, listener);
    }
    static off<E extends keyof BatcherEvents>(this: JobClass, event: E, listener: (...args: BatcherEvents[E]) => void): void {
      batcherOf(this).off(event, listener);
    }
    /** Closes the subclass's batcher for good: every later call throws `ClosedError`, as the function form's do. */
    static close(this: JobClass): Promise<void> {
      return batcherOf(this).close();
    }
  }
  return BatchByKeyJob;
}
