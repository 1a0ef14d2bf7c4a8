import Redlock from 'redlock';
import { Redis, Cluster } from 'ioredis';
import { Queue, type ConnectionOptions } from '../bullmq';
import { commandClient, endClient, fromUrl } from '../core/connection';
import { BatchByKeyError, ClosedError } from '../core/errors';
import { BatcherEmitter } from '../core/events';
import { log } from '../core/logger';
import { TicketChannel } from '../push/ticket-channel';
import { TicketOutbox } from '../storage/ticket-outbox';
import { limitsRecord, StoreAgreement } from '../storage/agreement';
import { GlobalLimits } from '../engine/global-limits';
import type { KeyQueue } from '../storage/job';
import { KeyJobs } from '../storage/key-job';
import { Keyspace } from '../storage/keys';
import { defineScripts, type RedisClient } from '../storage/scripts';
import { ShardQueues } from '../storage/shard-queues';
import { ShardCounts } from './shard-counts';
import { storeFor, type Store } from '../storage/store';
import type { ResolvedOptions } from '../options';
import type { Connection, Key } from '../core/types';

/** ioredis' options type lacks the index signature of BullMQ's; the values are the same. */
export function bullConnection(connection: Connection): ConnectionOptions {
  return (typeof connection === 'string' ? fromUrl(connection) : connection) as ConnectionOptions;
}

/**
 * What every part of one batcher shares, built once: its options, names and store, its Redis
 * connection and redlock (opened on first use, so that defining a batcher, at import time say,
 * costs nothing), its queues, the shard counts processes recorded, its store agreement, its
 * events and its ticket channel. The Producer, Operations and Workers of the batcher work
 * through it; `close` ends what it opened.
 */
export class BatcherRuntime {
  readonly connection: ConnectionOptions;
  readonly keyspace: Keyspace;
  readonly store: Store;
  readonly events: BatcherEmitter;
  readonly shards: ShardQueues;
  readonly agreement: StoreAgreement;
  readonly ticketChannel: TicketChannel;
  /** The batcher-wide limits as this process follows them (see engine/global-limits.ts). */
  readonly limits: GlobalLimits;
  /** The shard counts processes recorded, and this one's: the shards workers serve and reads read. */
  readonly shardCounts: ShardCounts;
  private redis: ReturnType<typeof commandClient> | undefined;
  private redlockOfClient: Redlock | undefined;
  private outbox: TicketOutbox | undefined;
  /** Aborted when the batcher is marked closed: every later call gets a ClosedError, and what a caller waits on for long (waitFor) ends. */
  private readonly closing = new AbortController();
  /** The calls of the batcher's methods under way (see `track`). */
  private readonly underWay = new Set<Promise<unknown>>();
  /** Set when `close` stopped waiting for calls still under way (see `track`). */
  private abandoned = false;

  constructor(readonly opts: ResolvedOptions) {
    this.connection = bullConnection(opts.connection);
    this.keyspace = new Keyspace(opts.prefix, opts.name);
    this.store = storeFor(opts.store);
    this.events = new BatcherEmitter(opts.logger);
    this.shards = new ShardQueues(opts.prefix, opts.name, this.keyspace, opts.shards, (prefix) => {
      const created: KeyQueue = new Queue(opts.name, { connection: this.connection, prefix });
      created.on('error', (err: Error) => log(opts.logger, 'warn', 'batch-by-key: queue error', { err }));
      return created;
    });
    const client = () => this.client();
    this.shardCounts = new ShardCounts(client, this.keyspace.config, opts.shards);
    this.limits = new GlobalLimits(
      {
        // Runs enter and leave the limits: a run that close() stops gives its place back (see runClient).
        client: () => this.runClient(),
        names: this.keyspace.limits,
        lockTtlMs: opts.lockTtlMs,
        logger: opts.logger,
        read: () => limitsRecord(this.client(), this.keyspace.config),
        wake: (waiter) => this.wake(waiter),
      },
      opts.globalLimits,
    );
    this.agreement = new StoreAgreement(
      client,
      this.keyspace.config,
      opts.store,
      opts.shards,
      opts.recoveryIntervalMs,
      opts.pushTimeoutMs,
      {
        pause: async () => void (await Promise.all(this.ownQueues().map((queue) => queue.pause()))),
        resume: async () => void (await Promise.all(this.ownQueues().map((queue) => queue.resume()))),
      },
      { defaults: opts.globalLimits, heard: (limits) => this.limits.heard(limits) },
    );
    this.ticketChannel = new TicketChannel(client, opts.logger);
  }

  assertOpen(): void {
    if (this.closing.signal.aborted) throw new ClosedError(`batcher ${this.opts.name} is closed; create a new one`);
  }

  /**
   * The command connection for what a worker's run writes: `close` closes it only after the
   * workers, so a run that the close stops still hands its key back (`client` refuses once the
   * close began, which failed that run's job and left its key to the recovery sweep).
   */
  runClient(): RedisClient {
    return this.redis?.client ?? this.client();
  }

  /** Our command connection (the user's client, or one we own), opened on first use; a ClosedError once closed. */
  client(): RedisClient {
    this.assertOpen();
    if (!this.redis) {
      this.redis = commandClient(this.opts.connection, this.opts.logger);
      defineScripts(this.redis.client);
    }
    return this.redis.client;
  }

  /** Only renewals go through redlock: the lock is taken by a run's first claim (see engine/lock.ts). */
  redlock(): Redlock {
    if (!this.redlockOfClient) {
      this.redlockOfClient = new Redlock([this.client()], { retryCount: 0 });
      this.redlockOfClient.on('error', (err) => log(this.opts.logger, 'warn', 'batch-by-key: redlock error', { err }));
    }
    return this.redlockOfClient;
  }

  /** What adds a settled ticket's callback job (a worker, the recovery sweep, a sealer): built once. */
  ticketOutbox(): TicketOutbox {
    const client = this.client();
    return (this.outbox ??= new TicketOutbox({
      client,
      keyspace: this.keyspace,
      queue: (key) => this.queueOf(key),
      ticketTtlMs: this.opts.ticketTtlMs,
      attempts: this.opts.attempts,
    }));
  }

  queueOf(key: Key): KeyQueue {
    return this.shards.of(key);
  }

  /** The queues of this batcher's own shard count. */
  ownQueues(): KeyQueue[] {
    return this.shards.all([this.opts.shards]);
  }

  /** The queues of every shard count served. */
  async allQueues(): Promise<KeyQueue[]> {
    return this.shards.all(await this.shardCounts.read());
  }

  /**
   * Promotes the delayed job of a key that waited for a place under `globalConcurrency`
   * (`${queue}|${jobId}`, see limits-enter.lua), if it is in a queue this process knows and still
   * delayed; otherwise it asks again by itself (LIMIT_RECHECK_MS).
   */
  private async wake(waiter: string): Promise<void> {
    const bar = waiter.indexOf('|');
    const queue = this.shards.all(this.shardCounts.served()).find((q) => q.qualifiedName === waiter.slice(0, bar));
    // A job no longer delayed refuses the promote (the caller logs it at debug).
    if (queue) await KeyJobs.wake(queue, waiter.slice(bar + 1));
  }

  /** Aborted once the batcher is marked closed. */
  get closedSignal(): AbortSignal {
    return this.closing.signal;
  }

  /**
   * Counts `call` as under way until it settles: `close` lets it finish before it closes the
   * connection (a call of several round trips, a pause's library load and script call say, found
   * it closed midway).
   */
  track<T>(call: Promise<T>): Promise<T> {
    this.underWay.add(call);
    const settled = () => void this.underWay.delete(call);
    call.then(settled, settled);
    // One the close stopped waiting for fails as the connection closes: with an error that says
    // so, not ioredis' "Connection is closed." (ours, a push's PushTimeoutError say, stand).
    return call.catch((err: unknown) => {
      if (!this.abandoned || err instanceof BatchByKeyError) throw err;
      throw new ClosedError(`batcher ${this.opts.name} closed before Redis answered this call (it waited pushTimeoutMs for it)`, {
        cause: err,
      });
    });
  }

  /**
   * Closes the queues, the ticket channel and our own connection (the user's client stays theirs),
   * once the calls under way have settled, or `pushTimeoutMs` after it began waiting for them
   * (Redis away: they fail then, as the connection closes). Their QUITs get `CLOSE_QUIT_WAIT_MS`:
   * a Redis that is up but does not answer (stopped, `CLIENT PAUSE`, a long script) would keep a
   * QUIT waiting for ever, so what is still open then is dropped (nothing is lost: every call that
   * mattered has settled or been given up above).
   */
  async close(): Promise<void> {
    this.abandoned = !(await settledWithin([...this.underWay], this.opts.pushTimeoutMs));
    const own = this.redis?.owned ? this.redis.client : undefined;
    // Queues on the user's client share it: BullMQ's close sends them nothing, and dropping them would drop it.
    const shared = this.opts.connection instanceof Redis || this.opts.connection instanceof Cluster;
    const queues = this.shards.opened();
    const graceful = Promise.all([
      ...queues.map((queue) => queue.close()),
      this.ticketChannel.close(),
      // QUIT waits in the offline queue while Redis is away (ioredis retries it for ~10 s): a
      // connection that is not ready has nothing to flush, so it is dropped at once.
      // Ended, not only disconnected: what it still queued (a worker's fetch) fails instead of waiting for ever.
      own && (own.status === 'ready' ? own.quit().catch(() => endClient(own)) : endClient(own)),
    ]);
    if (await settledWithin([graceful], CLOSE_QUIT_WAIT_MS)) return;
    // The QUITs still wait: dropped, they fail, and the close above ends with them (its errors are not the caller's).
    graceful.catch(() => undefined);
    if (!shared) for (const queue of queues) void queue.disconnect().catch(() => undefined);
    this.ticketChannel.drop();
    if (own) endClient(own);
  }

  /** Marks the batcher closed: every later call gets a ClosedError. True the first time. */
  markClosed(): boolean {
    if (this.closing.signal.aborted) return false;
    this.closing.abort();
    this.limits.stop();
    return true;
  }
}

/**
 * How long `X.close()` waits for Redis to answer the QUITs of the connections it opened (its
 * queues', its ticket channel's and its own) before it drops them.
 */
export const CLOSE_QUIT_WAIT_MS = 2_000;

/** Waits until every one of `calls` has settled, at most `ms`: true if they all did. */
async function settledWithin(calls: readonly Promise<unknown>[], ms: number): Promise<boolean> {
  if (calls.length === 0) return true;
  let timer: NodeJS.Timeout | undefined;
  const all = await Promise.race([
    Promise.allSettled(calls).then(() => true),
    new Promise<false>((resolve) => (timer = setTimeout(() => resolve(false), ms))),
  ]);
  clearTimeout(timer);
  return all;
}
