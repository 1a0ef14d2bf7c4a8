import { createBatcher } from './batcher';
import { resolveOptions } from './options';
import type { Batcher, BatchByKeyOptions, EachIteration, Id, IterationContext } from './core/types';

/** The names of the batcher's methods: all of `Batcher` but its properties `name` and `deadLetters`. */
export type BatcherMethod = {
  [K in keyof Batcher]-?: Batcher[K] extends (...args: never[]) => unknown ? K : never;
}[keyof Batcher];

/** The statics a class form gets: the batcher's every method, with the batcher's own types. */
export type BatcherStatics<Data = unknown> = Pick<Batcher<Data>, BatcherMethod>;

/**
 * Every method name, as a value to define the statics from. The compiler holds it to `Batcher`
 * (a method missing here, or one Batcher lacks, fails the build), so the class form cannot drift
 * from the function form again.
 */
const METHODS = {
  performBatchLater: true,
  createWorker: true,
  processor: true,
  attach: true,
  backlog: true,
  pending: true,
  inFlight: true,
  drop: true,
  stats: true,
  history: true,
  progress: true,
  waitFor: true,
  openTicket: true,
  sealTicket: true,
  on: true,
  off: true,
  pause: true,
  resume: true,
  paused: true,
  pauseAll: true,
  resumeAll: true,
  setGlobalRateLimit: true,
  setGlobalConcurrency: true,
  recover: true,
  shardCounts: true,
  retireShardCount: true,
  close: true,
} as const satisfies Record<BatcherMethod, true>;

/**
 * The class form, for people coming from the Ruby concern:
 * `class SegmentRefresher extends BatchByKey({ ... }) { async eachIteration(ids, ctx) {} }`.
 * Each subclass gets its own batcher on first use, and every method of a batcher as a static
 * (its `name` stays the class's own name: the batcher's is `SegmentRefresher.batcher.name`);
 * one instance serves one job run.
 */
export function BatchByKey<Data = unknown>(options: Omit<BatchByKeyOptions<Data>, 'eachIteration'>) {
  resolveOptions(options); // fail at class definition, not at the first push
  type JobClass = new () => { eachIteration(ids: Id[], ctx: IterationContext<Data>): PromiseLike<unknown> | void };
  const batchers = new WeakMap<JobClass, Batcher<Data>>();
  const batcherOf = (cls: JobClass): Batcher<Data> => {
    let batcher = batchers.get(cls);
    if (!batcher) {
      // The batcher moves data as opaque JSON; only the caller's types know its shape.
      const handler = (): EachIteration => {
        const instance = new cls();
        return (ids, ctx) => instance.eachIteration(ids, ctx as IterationContext<Data>);
      };
      batcher = createBatcher(options, handler) as Batcher<Data>;
      batchers.set(cls, batcher);
    }
    return batcher;
  };

  abstract class BatchByKeyJob {
    abstract eachIteration(ids: Id[], ctx: IterationContext<Data>): PromiseLike<unknown> | void;

    /** The subclass's batcher, for `dashboard`, `prometheusMetrics` and `bullBoardAdapters`. */
    static get batcher(): Batcher<Data> {
      return batcherOf(this as unknown as JobClass);
    }
    static get deadLetters(): Batcher<Data>['deadLetters'] {
      return batcherOf(this as unknown as JobClass).deadLetters;
    }
  }

  for (const method of Object.keys(METHODS) as BatcherMethod[]) {
    // A method, not an arrow: `this` is the subclass it is called on, whose batcher serves the call.
    const forward = {
      [method](this: JobClass, ...args: unknown[]): unknown {
        const batcher = batcherOf(this);
        return (batcher[method] as (...a: unknown[]) => unknown).apply(batcher, args);
      },
    }[method];
    // As a `static` in the class body would be: writable, configurable, not enumerable.
    Object.defineProperty(BatchByKeyJob, method, { value: forward, writable: true, configurable: true, enumerable: false });
  }
  return BatchByKeyJob as typeof BatchByKeyJob & BatcherStatics<Data>;
}
