import { Cluster } from 'ioredis';
import { queueListsOf, type QueueLists, type Worker } from '../bullmq';
import { InvalidOptionError, MissingHandlerError } from '../core/errors';
import { log } from '../core/logger';
import { AttachedWorkers } from '../engine/attach';
import { JobCancels } from '../engine/cancels';
import { workerBackend, type BackendMode } from '../engine/claims/backend';
import { firstClaimConfig, FusedClaims } from '../engine/claims/fused';
import { keyProcessor, workerKeyProcessor } from '../engine/processor';
import { RunEnv } from '../engine/run-env';
import { age, budgetOf } from '../engine/scheduling';
import { ShardWorker, type ShardRef } from '../engine/shard-worker';
import { SlotBudget } from '../engine/slots';
import { HistorySampler } from '../ops/history';
import { listForRecovery } from '../storage/batcher-protocol';
import { prioritizedLevels } from '../storage/job';
import { KeyJobs } from '../storage/key-job';
import { WORKER_DEFAULTS } from '../options';
import { bullConnection, type BatcherRuntime } from './runtime';
import type { Operations } from './operations';
import { checkCreateWorkerOptions, FOLLOWER_CONCURRENCY, refuseWorkerOptions } from './worker-options';
import type { CreateWorkerOptions, EachIteration, FallbackProcessor, Key, KeyProcessor, KeyWorker } from '../core/types';

/**
 * The workers of one batcher in this process: those `createWorker` made (each leading the
 * workers of the other shards under one slot budget, see shard-worker.ts) and those of the
 * caller's (`processor()` + `attach`), what runs while any lives (the recovery and aging sweeps,
 * the history sampler: engine/attach.ts), and how a run of theirs is equipped.
 */
export class Workers {
  private readonly attached: AttachedWorkers;
  /** The workers `createWorker` returned, each with how to make a follower for a shard. */
  private readonly leaders = new Map<ShardWorker, (shard: ShardRef) => ShardWorker>();
  private warnedFastPath = false;
  private env: RunEnv | undefined;

  constructor(
    private readonly runtime: BatcherRuntime,
    private readonly operations: Operations,
    private readonly handler: (() => EachIteration) | undefined,
  ) {
    const { opts } = runtime;
    // Started by the first worker attached in this process (see history.ts).
    const sampler = opts.history
      ? new HistorySampler({
          client: () => runtime.client(),
          names: runtime.keyspace.history,
          options: opts.history,
          stats: (statsOptions) => operations.stats(statsOptions),
          onProcessed: (count) => runtime.events.onProcessed(count),
          logger: opts.logger,
        })
      : undefined;
    this.attached = new AttachedWorkers({
      logger: opts.logger,
      listForRecovery: (key) => this.listForRecovery(key),
      intervalMs: opts.recoveryIntervalMs,
      shutdownTimeoutMs: opts.shutdownTimeoutMs,
      assertOpen: () => runtime.assertOpen(),
      // The sweep adds jobs on this process's count's queues: agreed first, so that they are paused
      // under pauseAll. It runs every half interval and leaves entries younger than a quarter (their
      // pusher may be adding the job), so a key listed at any moment is looked at within three
      // quarters of an interval, and its job added within one recoveryIntervalMs (attach.ts).
      recover: async () => {
        await runtime.agreement.check('worker');
        return operations.sweep(opts.recoveryIntervalMs / 4);
      },
      age:
        opts.scheduling === 'fair'
          ? async () =>
              Promise.all(
                (await runtime.allQueues()).map((queue) =>
                  age(queue, prioritizedLevels(opts.priority), opts.maxRuntimeMs, (key) =>
                    budgetOf(key, opts.maxRuntimeMs, opts.weight, opts.logger),
                  ),
                ),
              )
          : undefined,
      sampler,
      serveShards: async () => {
        const served = await runtime.shardCounts.read();
        await Promise.all([...this.leaders].map(([leader, make]) => leader.serveOnly(served, make)));
      },
    });
  }

  /** Throws what createWorker would throw for these options, without making a worker. */
  checkOptions(workerOptions: CreateWorkerOptions, where: string): void {
    checkCreateWorkerOptions(workerOptions, where, this.runtime.opts.prefix);
  }

  processor(fallback?: FallbackProcessor): KeyProcessor {
    // The run environment is built once: a closed batcher must still refuse a new processor.
    this.runtime.assertOpen();
    return keyProcessor(this.runEnv(), fallback);
  }

  attach(worker: Worker): void {
    // A Worker of the caller's, built with processor(): the same options fight its key jobs.
    refuseWorkerOptions("attach: the worker's options", worker.opts);
    // With shards, a worker of the caller's serves one shard's queue: one on any other prefix would serve nothing.
    const served = this.runtime.shards.own.prefixes;
    if (served.length > 1 && !served.includes(worker.opts.prefix ?? '')) {
      throw new InvalidOptionError(
        `attach: this batcher has ${served.length} shards, and the worker's prefix ${JSON.stringify(worker.opts.prefix)} is none of ` +
          `theirs: build one Worker per shard, with prefix ${served.map((p) => JSON.stringify(p)).join(', ')} (or use createWorker, ` +
          'which serves every shard under one concurrency)',
      );
    }
    this.attached.attach(worker);
  }

  createWorker(workerOptions: CreateWorkerOptions = {}): KeyWorker {
    const { runtime } = this;
    const { opts } = runtime;
    this.checkOptions(workerOptions, 'createWorker options');
    const config = firstClaimConfig(opts, runtime.keyspace.root);
    const backendMode: BackendMode = {
      plain: runtime.client() instanceof Cluster || opts.fastPath === 'off',
      warn: (problem) => this.warnFastPath(problem),
    };
    const workerConnection = workerOptions.connection === undefined ? runtime.connection : bullConnection(workerOptions.connection);
    // One budget for every shard's worker: the leader's concurrency (see slots.ts).
    const slots = new SlotBudget(() => leader.concurrency);
    const make = (shard: ShardRef, follower: boolean): ShardWorker => {
      const claims = new FusedClaims(
        config && {
          client: () => runtime.client(),
          config,
          agree: () => runtime.agreement.check('worker'),
          limited: () => runtime.limits.active(),
        },
      );
      const cancels = new JobCancels();
      const worker: ShardWorker = new ShardWorker(
        opts.name,
        // A run asks its own worker (made just below) before each slice.
        workerKeyProcessor(this.runEnv(), cancels, claims, (token) => worker.shed(token)),
        {
          ...WORKER_DEFAULTS,
          ...workerOptions,
          connection: workerConnection,
          // Not overridable: a worker on another prefix would serve a queue nobody feeds.
          prefix: runtime.shards.layout(shard.count).prefixes[shard.index]!,
          // A follower takes as many slots as the shared budget gives it, and runs when its leader does.
          ...(follower && { concurrency: FOLLOWER_CONCURRENCY, autorun: false }),
        },
        workerBackend(claims, backendMode),
        shard,
        slots,
      );
      cancels.serve(worker);
      claims.serve(worker);
      if (follower) this.attached.follow(worker);
      return worker;
    };
    const leader = make({ count: opts.shards, index: 0 }, false);
    this.attached.adopt(leader);
    const follow = (shard: ShardRef) => make(shard, true);
    this.leaders.set(leader, follow);
    leader.on('closed', () => this.leaders.delete(leader));
    void leader.serveOnly([opts.shards], follow);
    // Shards of other counts that processes recorded (a change of `shards` under way) join once read.
    runtime.shardCounts
      .read()
      .then((served) => leader.serveOnly(served, follow))
      .catch((err: unknown) => log(opts.logger, 'warn', 'batch-by-key: could not read the recorded shard counts', { err }));
    return leader;
  }

  /** Closes every worker made or attached here (their runs stop after their slice) and the sweeps. */
  async close(): Promise<void> {
    await this.attached.close();
  }

  /** What every run of this batcher's key jobs in this process runs with: built once, at the first worker. */
  private runEnv(): RunEnv {
    if (this.env) return this.env;
    const { runtime, handler } = this;
    const { opts } = runtime;
    if (!handler) {
      throw new MissingHandlerError(
        `batcher ${opts.name} has no eachIteration: it can push and read, but a worker needs the handler (define the batcher with ` +
          `eachIteration where workers run)`,
      );
    }
    // Built once per change of the counts served, not per run.
    let lists: { of: readonly number[]; lists: QueueLists[] } | undefined;
    const queueLists = () => {
      const served = runtime.shardCounts.served();
      if (lists?.of !== served) lists = { of: served, lists: runtime.shards.all(served).map(queueListsOf) };
      return lists.lists;
    };
    return (this.env = new RunEnv({
      client: runtime.client(),
      outbox: runtime.ticketOutbox(),
      redlock: runtime.redlock(),
      keyspace: runtime.keyspace,
      options: opts,
      handler,
      deadLetters: this.operations.deadLetters,
      events: runtime.events,
      queueLists,
      agree: () => runtime.agreement.check('worker'),
      listForRecovery: (key) => this.listForRecovery(key),
      limits: runtime.limits,
      keyJobs: new KeyJobs(runtime.runClient(), (key) => runtime.shards.of(key)),
    }));
  }

  /**
   * Lists a key in its shard's recovery index (see storage/batcher-protocol.ts `listForRecovery`).
   * Async, so that whatever it throws reaches the caller's catch.
   */
  private async listForRecovery(key: Key): Promise<void> {
    const { runtime } = this;
    return listForRecovery(runtime.runClient(), runtime.shards.forKey(key).index, key);
  }

  /** Once per batcher: 'auto' found the installed BullMQ unlike the one this version fuses runs into. */
  private warnFastPath(problem: string): void {
    if (this.warnedFastPath) return;
    this.warnedFastPath = true;
    log(
      this.runtime.opts.logger,
      'warn',
      `batch-by-key: the installed BullMQ is not the one this version fuses runs into (${problem}): workers run BullMQ's own fetch ` +
        "and completion, a round trip more per run (fastPath: 'off' silences this)",
    );
  }
}
