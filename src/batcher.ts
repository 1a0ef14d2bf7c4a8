import { Queue, type ConnectionOptions } from './bullmq';
import Redlock from 'redlock';
import { Cluster } from 'ioredis';
import { commandClient, fromUrl } from './core/connection';
import { onlyKnownOptions, optionNames } from './core/validate';
import { performBatchLater, type EnqueueDeps } from './push/enqueue';
import { DeadLetterBox } from './engine/dead-letters';
import { StoreAgreement } from './storage/agreement';
import { ClosedError, describe, InvalidOptionError, MissingHandlerError, ShardsInUseError } from './core/errors';
import { openTicket, sealTicket } from './push/tickets';
import type { TicketDeps } from './push/ticket-outbox';
import { BatcherEmitter } from './core/events';
import { validateKey } from './core/input';
import { Keyspace } from './storage/keys';
import { HistorySampler, readHistory } from './ops/history';
import { log } from './core/logger';
import { resolveOptions, validateWorkerConnection, WORKER_DEFAULTS, type ResolvedOptions } from './options';
import { pause, paused, resume, type PauseDeps } from './ops/pause';
import { JobCancels } from './engine/cancels';
import { keyProcessor, workerKeyProcessor, type ProcessorDeps } from './engine/processor';
import { firstClaimConfig, JobFinisher, type BackendMode } from './engine/finisher';
import { progress, waitFor } from './push/progress';
import { TicketChannel } from './push/ticket-channel';
import { age, budgetOf } from './engine/scheduling';
import { readKeyStats, stats } from './ops/stats';
import { registerBoardReads } from './ops/board-reads';
import { AttachedWorkers } from './engine/attach';
import { recoverStrandedKeys, type RecoveryDeps } from './engine/recovery';
import { defineScripts } from './storage/scripts';
import { backlog, storeFor } from './storage/store';
import { bullKeysOf, type KeyQueue } from './storage/job';
import { ShardQueues } from './storage/shard-queues';
import { forgetShardCount, recordedShardCounts, setPausedAll } from './storage/agreement';
import { shardCounts } from './ops/shard-counts';
import { MAX_SHARDS } from './storage/shards';
import { requiredInteger } from './core/validate';
import { ShardWorker, type ShardRef } from './engine/shard-worker';
import { SlotBudget } from './engine/slots';
import type {
  Batcher,
  BatchByKeyOptions,
  Connection,
  CreateWorkerOptions,
  EachIteration,
  FallbackProcessor,
  KeyProcessor,
  PerformOptions,
  PerformResult,
  PushItem,
  StatsOptions,
  Key,
} from './core/types';

/**
 * BullMQ's WorkerOptions as createWorker takes them (its prefix is the batcher's): the compiler
 * holds this list to BullMQ's type, so a BullMQ upgrade that adds an option fails the build here.
 */
const WORKER_OPTIONS = optionNames<CreateWorkerOptions>()([
  'autorun',
  'blockingConnection',
  'concurrency',
  'connection',
  'drainDelay',
  'limiter',
  'lockDuration',
  'lockRenewTime',
  'maxStalledCount',
  'maxStartedAttempts',
  'maximumRateLimitDelay',
  'metrics',
  'name',
  'removeOnComplete',
  'removeOnFail',
  'runRetryDelay',
  'settings',
  'skipLockRenewal',
  'skipStalledCheck',
  'skipVersionCheck',
  'skipWaitingForReady',
  'stalledInterval',
  'telemetry',
  'useWorkerThreads',
  'workerForkOptions',
  'workerThreadsOptions',
]);

/**
 * BullMQ worker options that fight a key job's life, refused with why; every other one of
 * WORKER_OPTIONS passes through to BullMQ as it is (docs/api.md, "createWorker(options)").
 */
const SANDBOX = "createWorker runs the batcher's processor in this process; BullMQ's sandbox is for a processor file";
const REFUSED_WORKER_OPTIONS: Partial<Record<keyof CreateWorkerOptions, string>> = {
  limiter:
    "BullMQ's limiter counts jobs, and a key's job carries many ids, so it would limit key runs, not ids: use the batcher's " +
    'rateLimit: { max, durationMs } (ids per key per window)',
  maxStartedAttempts:
    "a key's job starts again each time its run yields (its budget spent, or its turn given to another key), so BullMQ would " +
    "fail it at a later start and leave its ids to the recovery sweep: a slice's retries are the batcher's attempts and backoff",
  skipStalledCheck: "BullMQ's stalled check is how the keys of a worker that died (SIGKILL, out of memory) get their jobs back",
  skipLockRenewal: "a key's job runs up to maxRuntimeMs; without renewing its BullMQ lock, BullMQ takes it for stalled while it runs",
  useWorkerThreads: SANDBOX,
  workerForkOptions: SANDBOX,
  workerThreadsOptions: SANDBOX,
};

/** Throws for a refused BullMQ worker option that is on (see REFUSED_WORKER_OPTIONS); `where` names the options. */
function refuseWorkerOptions(where: string, options: object): void {
  for (const [name, why] of Object.entries(REFUSED_WORKER_OPTIONS)) {
    const value: unknown = (options as Record<string, unknown>)[name];
    if (value !== undefined && value !== false) throw new InvalidOptionError(`${where}: ${name} is not supported: ${why}`);
  }
}

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
 * A follower's own BullMQ concurrency (see shard-worker.ts): above any budget, so that the shared
 * budget, not the follower, decides how many of its jobs run.
 */
const FOLLOWER_CONCURRENCY = 100_000;

/** ioredis' options type lacks the index signature of BullMQ's; the values are the same. */
function bullConnection(connection: Connection): ConnectionOptions {
  return (typeof connection === 'string' ? fromUrl(connection) : connection) as ConnectionOptions;
}

/**
 * Wires one batcher: options, Redis clients, the BullMQ queue, and the workers it creates (what
 * it does for a worker while the worker lives is engine/attach.ts).
 * `handler` is late-bound so the class form can supply its method; without one the batcher is a
 * producer (it pushes and reads, and refuses to make a worker).
 * @internal
 */
export function createBatcher(options: BatchByKeyOptions, handler: (() => EachIteration) | undefined): Batcher {
  const opts: ResolvedOptions = resolveOptions(options);
  const connection = bullConnection(opts.connection);
  const keyspace = new Keyspace(opts.prefix, opts.name);
  const store = storeFor(opts.store);
  let redis: ReturnType<typeof commandClient> | undefined;
  let redlock: Redlock | undefined;
  let closed = false;

  const assertOpen = () => {
    if (closed) throw new ClosedError(`batcher ${opts.name} is closed; create a new one`);
  };
  // Connections open on first use, so building a batcher (e.g. at import time) costs nothing.
  const client = () => {
    assertOpen();
    if (!redis) {
      redis = commandClient(opts.connection, opts.logger);
      defineScripts(redis.client);
    }
    return redis.client;
  };
  const ticketChannel = new TicketChannel(client, opts.logger);
  const shards = new ShardQueues(opts.prefix, opts.name, keyspace, opts.shards, (prefix) => {
    const created: KeyQueue = new Queue(opts.name, { connection, prefix });
    created.on('error', (err: Error) => log(opts.logger, 'warn', 'batch-by-key: queue error', { err }));
    return created;
  });
  const queueOf = (key: Key) => shards.of(key);
  // Every count a process recorded, and this one's: the shards workers serve and reads read. Calls
  // made while one read is under way share it (a worker's sweep asks three times at once).
  // The counts last read: a run's preemption reads the wait lists of every count served.
  let served: readonly number[] = [opts.shards];
  const readCounts = async (): Promise<number[]> => {
    const recorded = await recordedShardCounts(client(), keyspace.config);
    const read = recorded.includes(opts.shards) ? recorded : [...recorded, opts.shards].sort((a, b) => a - b);
    served = read;
    return read;
  };
  let reading: Promise<number[]> | undefined;
  const counts = (): Promise<number[]> => (reading ??= readCounts().finally(() => (reading = undefined)));
  const allQueues = async () => shards.all(await counts());
  const getRedlock = () => {
    if (!redlock) {
      // Only renewals go through redlock: the lock is taken by a run's first claim (see lock.ts).
      redlock = new Redlock([client()], { retryCount: 0 });
      redlock.on('error', (err) => log(opts.logger, 'warn', 'batch-by-key: redlock error', { err }));
    }
    return redlock;
  };
  const ownQueues = () => shards.all([opts.shards]);
  const agreement = new StoreAgreement(client, keyspace.config, opts.store, opts.shards, opts.recoveryIntervalMs, opts.pushTimeoutMs, {
    pause: async () => void (await Promise.all(ownQueues().map((queue) => queue.pause()))),
    resume: async () => void (await Promise.all(ownQueues().map((queue) => queue.resume()))),
  });
  const enqueueDeps = (): EnqueueDeps => ({
    client: client(),
    shard: (key) => shards.forKey(key),
    keyspace,
    store,
    resolver: opts.key,
    ticketTtlMs: opts.ticketTtlMs,
    fair: opts.scheduling === 'fair',
    sliceSize: opts.sliceSize,
    timeoutMs: opts.pushTimeoutMs,
    agree: () => agreement.check('push'),
    merge: opts.merge,
    callbacks: opts.onTicketSettled !== undefined,
    tickets: ticketDeps(),
  });
  // Whoever sees a ticket settle adds its callback job (a worker, the recovery sweep, a sealer).
  const ticketDeps = (): TicketDeps => ({
    client: client(),
    keyspace,
    queue: queueOf,
    ticketTtlMs: opts.ticketTtlMs,
    attempts: opts.attempts,
  });
  const events = new BatcherEmitter(opts.logger);
  const push = async (ids: ReadonlyArray<PushItem>, performOptions?: PerformOptions): Promise<PerformResult> => {
    const result = await performBatchLater(enqueueDeps(), ids, performOptions);
    if (result.pushed > 0) events.emit('pushed', { key: result.key, count: result.pushed });
    return result;
  };
  const deadLetters = new DeadLetterBox({
    client,
    keyspace,
    maxDeadLetters: opts.maxDeadLetters,
    push: (key, ids) => push(ids, { key }),
  });
  const recoveryDeps = (): RecoveryDeps => ({
    tickets: ticketDeps(),
    client: client(),
    counts,
    shards,
    keyspace,
    store,
    graceMs: opts.recoveryIntervalMs,
    lockTtlMs: opts.lockTtlMs,
    logger: opts.logger,
  });

  const pauseDeps = (): PauseDeps => ({ client: client(), keyspace, queue: queueOf, store: opts.store });
  const readStats = async (statsOptions?: StatsOptions) =>
    stats(
      {
        name: opts.name,
        client: client(),
        keyspace,
        store,
        indexes: async () => shards.indexes(await counts()),
        deadCount: () => deadLetters.count(),
        // Async, so that a closed batcher rejects here rather than throws while stats() builds its reads (whose rejections would go unhandled).
        pausedKeys: async () => paused(pauseDeps()),
      },
      statsOptions,
    );
  // Started by the first worker attached in this process (see history.ts).
  const sampler = opts.history
    ? new HistorySampler({
        client,
        names: keyspace.history,
        options: opts.history,
        stats: readStats,
        onProcessed: (count) => events.onProcessed(count),
        logger: opts.logger,
      })
    : undefined;

  const attached = new AttachedWorkers({
    logger: opts.logger,
    intervalMs: opts.recoveryIntervalMs,
    assertOpen,
    // Async, so that a sweep that cannot even start (a closed client) rejects rather than throws in a timer.
    // The sweep adds jobs on this process's count's queues: agreed first, so that they are paused under pauseAll.
    recover: async () => {
      await agreement.check('worker');
      return recoverStrandedKeys(recoveryDeps());
    },
    age:
      opts.scheduling === 'fair'
        ? async () =>
            Promise.all(
              (await allQueues()).map((queue) =>
                age(queue, opts.maxRuntimeMs, (key) => budgetOf(key, opts.maxRuntimeMs, opts.weight, opts.logger)),
              ),
            )
        : undefined,
    sampler,
    serveShards: async () => {
      const served = await counts();
      await Promise.all([...leaders].map(([leader, make]) => leader.serveOnly(served, make)));
    },
  });
  /** The workers `createWorker` returned, each leading the workers of the other shards, with how to make one (see shard-worker.ts). */
  const leaders = new Map<ShardWorker, (shard: ShardRef) => ShardWorker>();

  /** A processor for BullMQ workers; `finisher` for our own workers (see engine/finisher.ts). */
  /** What a processor of this batcher runs with; `finisher` for createWorker's (see finisher.ts). */
  function processorDeps(finisher?: JobFinisher): ProcessorDeps {
    if (!handler) {
      throw new MissingHandlerError(
        `batcher ${opts.name} has no eachIteration: it can push and read, but a worker needs the handler (define the batcher with ` +
          `eachIteration where workers run)`,
      );
    }
    // Built once per change of the counts served, not per run.
    let lists: { of: readonly number[]; lists: ReturnType<typeof bullKeysOf>[] } | undefined;
    const queueLists = () => {
      if (lists?.of !== served) lists = { of: served, lists: shards.all(served).map(bullKeysOf) };
      return lists.lists;
    };
    return {
      client: client(),
      redlock: getRedlock(),
      keyspace,
      options: opts,
      handler,
      deadLetters,
      events,
      queueLists,
      agree: () => agreement.check('worker'),
      tickets: ticketDeps(),
      ...(finisher && { finisher }),
    };
  }

  const checkOptions = (workerOptions: CreateWorkerOptions, where: string): void => {
    if (typeof workerOptions === 'object' && workerOptions !== null) {
      onlyKnownOptions(where, workerOptions, WORKER_OPTIONS);
      refuseWorkerOptions(where, workerOptions);
    }
    validateWorkerConnection(workerOptions.connection, opts.prefix);
  };

  const batcher: Batcher = {
    name: opts.name,
    performBatchLater: push,
    processor(fallback?: FallbackProcessor): KeyProcessor {
      return keyProcessor(processorDeps(), fallback);
    },
    attach(worker) {
      // A Worker of the caller's, built with processor(): the same options fight its key jobs.
      refuseWorkerOptions("attach: the worker's options", worker.opts);
      // With shards, a worker of the caller's serves one shard's queue: one on any other prefix would serve nothing.
      const served = shards.own.prefixes;
      if (served.length > 1 && !served.includes(worker.opts.prefix ?? '')) {
        throw new InvalidOptionError(
          `attach: this batcher has ${served.length} shards, and the worker's prefix ${JSON.stringify(worker.opts.prefix)} is none of ` +
            `theirs: build one Worker per shard, with prefix ${served.map((p) => JSON.stringify(p)).join(', ')} (or use createWorker, ` +
            'which serves every shard under one concurrency)',
        );
      }
      attached.attach(worker);
    },
    createWorker(workerOptions: CreateWorkerOptions = {}) {
      checkOptions(workerOptions, 'createWorker options');
      const config = firstClaimConfig(opts, keyspace.root);
      const cluster = client() instanceof Cluster;
      let warned = false;
      const backendMode: BackendMode = {
        plain: cluster || opts.fastPath === 'off',
        warn: (problem) => {
          if (warned) return;
          warned = true;
          log(
            opts.logger,
            'warn',
            `batch-by-key: the installed BullMQ is not the one this version fuses runs into (${problem}): workers run BullMQ's own fetch and completion, a round trip more per run (fastPath: 'off' silences this)`,
          );
        },
      };
      const workerConnection = workerOptions.connection === undefined ? connection : bullConnection(workerOptions.connection);
      // One budget for every shard's worker: the leader's concurrency (see slots.ts).
      const slots = new SlotBudget(() => leader.concurrency);
      const make = (shard: ShardRef, follower: boolean): ShardWorker => {
        const finisher = new JobFinisher(config && { client, config, agree: () => agreement.check('worker') });
        const cancels = new JobCancels();
        const worker = new ShardWorker(
          opts.name,
          workerKeyProcessor(processorDeps(finisher), cancels),
          {
            ...WORKER_DEFAULTS,
            ...workerOptions,
            connection: workerConnection,
            // Not overridable: a worker on another prefix would serve a queue nobody feeds.
            prefix: shards.layout(shard.count).prefixes[shard.index]!,
            // A follower takes as many slots as the shared budget gives it, and runs when its leader does.
            ...(follower && { concurrency: FOLLOWER_CONCURRENCY, autorun: false }),
          },
          finisher.factory(backendMode),
          shard,
          slots,
        );
        cancels.serve(worker);
        finisher.serve(worker);
        if (follower) attached.follow(worker);
        return worker;
      };
      const leader = make({ count: opts.shards, index: 0 }, false);
      attached.adopt(leader);
      const follow = (shard: ShardRef) => make(shard, true);
      leaders.set(leader, follow);
      leader.on('closed', () => leaders.delete(leader));
      void leader.serveOnly([opts.shards], follow);
      // Shards of other counts that processes recorded (a change of `shards` under way) join once read.
      counts()
        .then((served) => leader.serveOnly(served, follow))
        .catch((err: unknown) => log(opts.logger, 'warn', 'batch-by-key: could not read the recorded shard counts', { err }));
      return leader;
    },
    stats: readStats,
    history: async () => readHistory(client(), keyspace.history, opts.name),
    backlog: async (key) => backlog(client(), store, keyspace.forKey(validateKey(key, 'key'))),
    recover: async () => recoverStrandedKeys({ ...recoveryDeps(), graceMs: 0 }),
    shardCounts: async () => shardCounts(client(), await counts(), opts.shards, shards),
    retireShardCount: async (count) => {
      // Checked before client(): nothing reaches Redis with a bad count (a missing one included).
      requiredInteger('retireShardCount count', count, 1, MAX_SHARDS);
      const [listed] = await shardCounts(client(), [count], opts.shards, shards);
      if (listed!.own || listed!.jobs > 0 || listed!.keys > 0)
        throw new ShardsInUseError(
          listed!.own
            ? `shard count ${count} is this batcher's own shards option: retire a count no process uses any more`
            : `shard count ${count} still has ${listed!.jobs} key jobs on its queues and ${listed!.keys} keys in its recovery indexes: ` +
                'retire it once they have run and the recovery sweep has dropped them (shardCounts() tells)',
        );
      const leftMs = await forgetShardCount(client(), keyspace.config, count);
      if (leftMs > 0)
        throw new ShardsInUseError(
          `shard count ${count} was checked by a process that may still push to it without checking again for ${leftMs} ms ` +
            '(its recoveryIntervalMs plus pushTimeoutMs): retire it once no process has used it for that long',
        );
      // A read of the counts that began before the change would answer without it.
      reading = undefined;
      // Its queues were opened for the check above only (up to 64 connections): not kept until close.
      await shards.closeCount(count);
    },
    pause: async (key, pauseOptions) => pause(pauseDeps(), key, pauseOptions),
    resume: async (key) => resume(pauseDeps(), key),
    paused: async () => paused(pauseDeps()),
    // The mark first, then the counts read after it: a process that records a new count either
    // finds the mark (and pauses its own queues; see agreement.ts) or is among the counts read.
    pauseAll: async () => {
      await setPausedAll(client(), keyspace.config, true);
      await Promise.all(shards.all(await readCounts()).map((queue) => queue.pause()));
    },
    resumeAll: async () => {
      await setPausedAll(client(), keyspace.config, false);
      await Promise.all(shards.all(await readCounts()).map((queue) => queue.resume()));
    },
    deadLetters,
    progress: async (ticket) => progress(client(), keyspace, ticket),
    waitFor: async (ticket, waitOptions) => waitFor(client(), keyspace, ticketChannel, ticket, waitOptions),
    openTicket: async (key, ticketOptions) => {
      const callback = ticketOptions?.callback;
      if (callback !== undefined && typeof callback !== 'boolean')
        throw new InvalidOptionError(`openTicket callback must be a boolean, got ${describe(callback)}`);
      return openTicket(ticketDeps(), validateKey(key, 'key'), callback ?? opts.onTicketSettled !== undefined);
    },
    sealTicket: async (ticket) => sealTicket(ticketDeps(), ticket),
    on(event, listener) {
      events.on(event, listener);
      return this;
    },
    off(event, listener) {
      events.off(event, listener);
      return this;
    },
    async close() {
      if (closed) return;
      closed = true;
      await attached.close();
      await Promise.all(shards.opened().map((queue) => queue.close()));
      await ticketChannel.close();
      if (redis?.owned) {
        const own = redis.client;
        // QUIT waits in the offline queue while Redis is away (ioredis retries it for ~10 s): a
        // connection that is not ready has nothing to flush, so it is dropped at once.
        if (own.status === 'ready') await own.quit().catch(() => own.disconnect());
        else own.disconnect();
      }
    },
  };
  workerOptionChecks.set(batcher, checkOptions);
  registerBoardReads(batcher, {
    queues: () => {
      assertOpen();
      return ownQueues();
    },
    readKeys: async (keys) => readKeyStats({ client: client(), keyspace, store }, keys),
  });
  return batcher;
}
