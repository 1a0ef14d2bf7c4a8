import { Queue, Worker, type ConnectionOptions } from 'bullmq';
import Redlock from 'redlock';
import { Cluster } from 'ioredis';
import { commandClient, fromUrl } from './core/connection';
import { onlyKnownOptions, optionNames } from './core/validate';
import { performBatchLater, type EnqueueDeps } from './push/enqueue';
import { DeadLetterBox } from './engine/dead-letters';
import { StoreAgreement } from './storage/agreement';
import { ClosedError, describe, InvalidOptionError, MissingHandlerError } from './core/errors';
import { openTicket, sealTicket, type TicketDeps } from './push/tickets';
import { BatcherEmitter } from './core/events';
import { validateKey } from './core/input';
import { Keyspace } from './storage/keys';
import { HistorySampler, readHistory } from './ops/history';
import { log } from './core/logger';
import { resolveOptions, validateWorkerConnection, type ResolvedOptions } from './options';
import { pause, paused, resume, type PauseDeps } from './ops/pause';
import { JobCancels } from './engine/cancels';
import { keyProcessor, workerKeyProcessor, type ProcessorDeps } from './engine/processor';
import { firstClaimConfig, JobFinisher } from './engine/finisher';
import { progress, waitFor } from './push/progress';
import { age, budgetOf } from './engine/scheduling';
import { stats } from './ops/stats';
import { AttachedWorkers } from './engine/attach';
import { recoverStrandedKeys, type RecoveryDeps } from './engine/recovery';
import { defineScripts } from './storage/scripts';
import { backlog, storeFor } from './storage/store';
import { bullKeysOf, type KeyQueue } from './storage/job';
import type {
  Batcher,
  BatchByKeyOptions,
  Connection,
  CreateWorkerOptions,
  EachIteration,
  FallbackProcessor,
  KeyJobData,
  KeyProcessor,
  PerformOptions,
  PerformResult,
  PushItem,
  StatsOptions,
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
  let queue: KeyQueue | undefined;
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
  const getQueue = (): KeyQueue => {
    if (!queue) {
      const created: KeyQueue = new Queue(opts.name, { connection, prefix: opts.prefix });
      created.on('error', (err: Error) => log(opts.logger, 'warn', 'batch-by-key: queue error', { err }));
      queue = created;
    }
    return queue;
  };
  const getRedlock = () => {
    if (!redlock) {
      // Only renewals go through redlock: the lock is taken by a run's first claim (see lock.ts).
      redlock = new Redlock([client()], { retryCount: 0 });
      redlock.on('error', (err) => log(opts.logger, 'warn', 'batch-by-key: redlock error', { err }));
    }
    return redlock;
  };
  const agreement = new StoreAgreement(client, keyspace.config, opts.store);
  const enqueueDeps = (): EnqueueDeps => ({
    client: client(),
    queue: getQueue,
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
    queue: getQueue,
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
    queue: getQueue,
    keyspace,
    store,
    graceMs: opts.recoveryIntervalMs,
    logger: opts.logger,
  });

  const pauseDeps = (): PauseDeps => ({ client: client(), keyspace, queue: getQueue, store: opts.store });
  const readStats = async (statsOptions?: StatsOptions) =>
    stats(
      { name: opts.name, client: client(), keyspace, store, deadCount: () => deadLetters.count(), pausedKeys: () => paused(pauseDeps()) },
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
    recover: async () => recoverStrandedKeys(recoveryDeps()),
    age:
      opts.scheduling === 'fair'
        ? async () => age(getQueue(), opts.maxRuntimeMs, (key) => budgetOf(key, opts.maxRuntimeMs, opts.weight, opts.logger))
        : undefined,
    sampler,
  });

  /** A processor for BullMQ workers; `finisher` for our own workers (see engine/finisher.ts). */
  /** What a processor of this batcher runs with; `finisher` for createWorker's (see finisher.ts). */
  function processorDeps(finisher?: JobFinisher): ProcessorDeps {
    if (!handler) {
      throw new MissingHandlerError(
        `batcher ${opts.name} has no eachIteration: it can push and read, but a worker needs the handler (define the batcher with ` +
          `eachIteration where workers run)`,
      );
    }
    // Built once, not per run: the queue's names never change.
    let lists: ReturnType<typeof bullKeysOf> | undefined;
    const queueLists = () => (lists ??= bullKeysOf(getQueue()));
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

  const batcher: Batcher = {
    name: opts.name,
    performBatchLater: push,
    processor(fallback?: FallbackProcessor): KeyProcessor {
      return keyProcessor(processorDeps(), fallback);
    },
    attach(worker) {
      attached.attach(worker);
    },
    createWorker(workerOptions: CreateWorkerOptions = {}) {
      if (typeof workerOptions === 'object' && workerOptions !== null)
        onlyKnownOptions('createWorker options', workerOptions, WORKER_OPTIONS);
      validateWorkerConnection(workerOptions.connection, opts.prefix);
      const config = firstClaimConfig(opts, keyspace.root);
      const finisher = new JobFinisher(config && { client, config, agree: () => agreement.check('worker') });
      const cancels = new JobCancels();
      const worker = new Worker<KeyJobData, void, string>(
        opts.name,
        workerKeyProcessor(processorDeps(finisher), cancels),
        {
          ...workerOptions,
          connection: workerOptions.connection === undefined ? connection : bullConnection(workerOptions.connection),
          // Not overridable: a worker on another prefix would serve a queue nobody feeds.
          prefix: opts.prefix,
        },
        finisher.factory(client() instanceof Cluster),
      );
      cancels.serve(worker);
      // Typed for our job data to the caller; the bookkeeping here holds workers of any data.
      const untyped = worker as unknown as Worker;
      finisher.serve(untyped);
      attached.adopt(untyped);
      return worker;
    },
    stats: readStats,
    history: async () => readHistory(client(), keyspace.history, opts.name),
    backlog: async (key) => backlog(client(), store, keyspace.forKey(validateKey(key, 'key'))),
    recover: async () => recoverStrandedKeys({ ...recoveryDeps(), graceMs: 0 }),
    pause: async (key, pauseOptions) => pause(pauseDeps(), key, pauseOptions),
    resume: async (key) => resume(pauseDeps(), key),
    paused: async () => paused(pauseDeps()),
    pauseAll: async () => getQueue().pause(),
    resumeAll: async () => getQueue().resume(),
    deadLetters,
    progress: async (ticket) => progress(client(), keyspace, ticket),
    waitFor: async (ticket, waitOptions) => waitFor(client(), keyspace, ticket, waitOptions),
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
      await queue?.close();
      if (redis?.owned) {
        const own = redis.client;
        // QUIT waits in the offline queue while Redis is away (ioredis retries it for ~10 s): a
        // connection that is not ready has nothing to flush, so it is dropped at once.
        if (own.status === 'ready') await own.quit().catch(() => own.disconnect());
        else own.disconnect();
      }
    },
  };
  return batcher;
}
