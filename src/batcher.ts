import { registerBoardReads } from './ops/board-reads';
import { levelsOf } from './storage/job';
import { resolveOptions } from './options';
import { Operations } from './runtime/operations';
import { Producer } from './runtime/producer';
import { BatcherRuntime } from './runtime/runtime';
import { Workers } from './runtime/workers';
import type { Batcher, BatchByKeyOptions, CreateWorkerOptions, EachIteration, PerformOptions, PushItem } from './core/types';

/** Each batcher's check of createWorker's options (see checkWorkerOptions). */
const workerOptionChecks = new WeakMap<Batcher, (workerOptions: CreateWorkerOptions, where: string) => void>();

/**
 * Throws what `batcher.createWorker(workerOptions)` would throw for its options, without making
 * a worker: the NestJS module checks every processor's before it starts any. `where` names the
 * options in the message.
 * @internal
 */
export function checkWorkerOptions(batcher: Batcher, workerOptions: CreateWorkerOptions, where: string): void {
  const check = workerOptionChecks.get(batcher);
  if (!check) throw new TypeError('checkWorkerOptions: not a batcher made by createBatcher');
  check(workerOptions, where);
}

/**
 * One batcher: a thin facade over its parts, built once (src/runtime/): the BatcherRuntime they
 * share (options, names, the connection, queues, shard counts, events), the Producer (pushes,
 * tickets), Operations (what an operator reads and does) and Workers (the workers made or
 * attached here, and how their runs are equipped). `handler` is late-bound so the class form can
 * supply its method; without one the batcher is a producer (it pushes and reads, and refuses to
 * make a worker).
 * @internal
 */
export function createBatcher(options: BatchByKeyOptions, handler: (() => EachIteration) | undefined): Batcher {
  const runtime = new BatcherRuntime(resolveOptions(options));
  const producer = new Producer(runtime);
  const operations = new Operations(runtime, producer);
  const workers = new Workers(runtime, operations, handler);
  // A call under way when close() begins finishes before the connection closes (waitFor, a long wait, is ended instead).
  const track = <T>(call: Promise<T>) => runtime.track(call);
  const batcher: Batcher = {
    name: runtime.opts.name,
    // A push with `track: true` or `ticket` always resolves with its ticket (push/enqueue.ts): the overloads tell the caller so.
    performBatchLater: (async (ids: ReadonlyArray<PushItem>, performOptions?: PerformOptions) =>
      track(producer.push(ids, performOptions))) as Batcher['performBatchLater'],
    processor: (fallback) => workers.processor(fallback),
    attach: (worker) => workers.attach(worker),
    createWorker: (workerOptions) => workers.createWorker(workerOptions),
    stats: async (statsOptions) => track(operations.stats(statsOptions)),
    history: async () => track(operations.history()),
    backlog: async (key) => track(operations.backlog(key)),
    pending: async (key, pendingOptions) => track(operations.pending(key, pendingOptions)),
    inFlight: async (key) => track(operations.inFlight(key)),
    drop: async (key, dropOptions) => track(operations.drop(key, dropOptions)),
    recover: async (recoverOptions) => track(operations.recover(0, recoverOptions)),
    shardCounts: async () => track(operations.shardCounts()),
    retireShardCount: async (count) => track(operations.retireShardCount(count)),
    pause: async (key, pauseOptions) => track(operations.pause(key, pauseOptions)),
    resume: async (key) => track(operations.resume(key)),
    paused: async () => track(operations.paused()),
    pauseAll: async () => track(operations.pauseAll()),
    resumeAll: async () => track(operations.resumeAll()),
    setGlobalRateLimit: async (limit) => track(operations.setGlobalRateLimit(limit)),
    setGlobalConcurrency: async (n) => track(operations.setGlobalConcurrency(n)),
    deadLetters: operations.deadLetters,
    progress: async (ticket) => track(producer.progress(ticket)),
    waitFor: async (ticket, waitOptions) => producer.waitFor(ticket, waitOptions),
    openTicket: async (key, ticketOptions) => track(producer.openTicket(key, ticketOptions)),
    sealTicket: async (ticket) => track(producer.sealTicket(ticket)),
    on(event, listener) {
      runtime.events.on(event, listener);
      return this;
    },
    off(event, listener) {
      runtime.events.off(event, listener);
      return this;
    },
    async close() {
      if (!runtime.markClosed()) return;
      producer.flush();
      await workers.close();
      await runtime.close();
    },
  };
  workerOptionChecks.set(batcher, (workerOptions: CreateWorkerOptions, where: string) => workers.checkOptions(workerOptions, where));
  registerBoardReads(batcher, {
    queues: () => {
      runtime.assertOpen();
      return runtime.ownQueues();
    },
    readKeys: async (keys) => operations.readKeys(keys),
    levels: levelsOf(runtime.opts.priority),
    logger: runtime.opts.logger,
  });
  return batcher;
}
