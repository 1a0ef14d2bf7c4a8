import { globalLimitsStats, setGlobalConcurrency, setGlobalRateLimit } from '../ops/limits';
import { recordedLimits } from '../storage/agreement';
import { describe, InvalidOptionError, ShardsInUseError } from '../core/errors';
import { validateKey } from '../core/input';
import { boolean, integer, oneOf, onlyKnownOptions, optionNames, requiredInteger } from '../core/validate';
import { fillOf } from '../core/fill';
import { DeadLetterBox } from '../engine/dead-letters';
import { KeyspaceWalk, listEveryKey, recoverStrandedKeys, type RecoveryDeps } from '../engine/recovery';
import { readHistory } from '../ops/history';
import { pause, paused, resume, type PauseDeps } from '../ops/pause';
import { shardCounts } from '../ops/shard-counts';
import { readKeyStats, stats } from '../ops/stats';
import { forgetShardCount, setPausedAll } from '../storage/agreement';
import { keyLevels } from '../storage/job';
import { MAX_SHARDS } from '../storage/shards';
import { liveJobKeys } from '../storage/job';
import { backlog } from '../storage/store';
import { keyInFlight, pendingPage, type PageRequest } from '../storage/key-reads';
import { dropKey } from '../storage/drop';
import { KeyJobs } from '../storage/key-job';
import { log } from '../core/logger';
import type { Producer } from './producer';
import type { BatcherRuntime } from './runtime';
import type {
  Backlog,
  Dropped,
  DropOptions,
  History,
  Key,
  KeyInFlight,
  PendingOptions,
  PendingPage,
  KeyStats,
  PausedKey,
  PauseOptions,
  RecoverOptions,
  ShardCount,
  Stats,
  StatsOptions,
  RateLimit,
  StoreKind,
} from '../core/types';

/** What an operator reads and does: stats, history, backlogs, pauses, dead letters, shard counts, recovery. */
export class Operations {
  readonly deadLetters: DeadLetterBox;
  /** The workers' sweeps' walk over Redis, resumed by each (see recovery.ts). */
  private readonly walk = new KeyspaceWalk();

  constructor(
    private readonly runtime: BatcherRuntime,
    producer: Producer,
  ) {
    this.deadLetters = new DeadLetterBox({
      client: () => runtime.client(),
      keyspace: runtime.keyspace,
      maxDeadLetters: runtime.opts.maxDeadLetters,
      push: (key, ids) => producer.push(ids, { key }),
      logger: runtime.opts.logger,
    });
  }

  async stats(options?: StatsOptions): Promise<Stats> {
    const { runtime } = this;
    return stats(
      {
        name: runtime.opts.name,
        client: runtime.client(),
        keyspace: runtime.keyspace,
        store: runtime.store,
        indexes: async () => runtime.shards.indexes(await runtime.shardCounts.read()),
        jobKeys: async (limit) => {
          const keys: Key[] = [];
          for (const queue of runtime.shards.all(await runtime.shardCounts.read())) {
            if (keys.length >= limit) break;
            keys.push(...(await liveJobKeys(queue, limit - keys.length)));
          }
          return keys;
        },
        deadCount: () => this.deadLetters.count(),
        // Async, so that a closed batcher rejects here rather than throws while stats() builds its reads (whose rejections would go unhandled).
        pausedKeys: async () => paused(this.pauseDeps()),
        limits: async () => globalLimitsStats(runtime.client(), runtime.keyspace),
      },
      options,
    );
  }

  /** These keys' backlogs and lag in one batch of reads (bull-board's adapters). */
  async readKeys(keys: readonly Key[]): Promise<{ at: number; keys: KeyStats[] }> {
    return readKeyStats({ client: this.runtime.client(), keyspace: this.runtime.keyspace, store: this.runtime.store }, keys);
  }

  async history(): Promise<History> {
    return readHistory(this.runtime.client(), this.runtime.keyspace.history, this.runtime.opts.name);
  }

  async backlog(key: Key): Promise<Backlog> {
    return backlog(this.runtime.client(), this.runtime.store, this.runtime.keyspace.forKey(validateKey(key, 'key')));
  }

  async pending(key: Key, options?: PendingOptions): Promise<PendingPage> {
    const { runtime } = this;
    const names = runtime.keyspace.forKey(validateKey(key, 'key'));
    return pendingPage(runtime.client(), runtime.store.kind, names, pageRequest(runtime.store.kind, options));
  }

  async inFlight(key: Key): Promise<KeyInFlight> {
    const { runtime } = this;
    return keyInFlight(runtime.client(), runtime.store, runtime.keyspace.forKey(validateKey(key, 'key')));
  }

  /**
   * Drops the key's backlog (storage/drop.ts, one call in its slot), then what lives elsewhere:
   * its job, if it still waits (a push since found no pointer and added its own, so removing this
   * one strands nothing), the callbacks of the tickets it settled (left in the key's outbox for
   * the recovery sweep if this fails), and with `deadLetters` its dead letters (their own slot:
   * a second call).
   */
  async drop(rawKey: Key, options?: DropOptions): Promise<Dropped> {
    const key = validateKey(rawKey, 'key');
    const { deadLetters } = dropOptions(options);
    const { runtime } = this;
    const client = runtime.client();
    const removed = await dropKey(client, runtime.opts.store, runtime.keyspace.forKey(key), key, runtime.shards.forKey(key));
    if (removed.jobId !== undefined) await new KeyJobs(client, (k) => runtime.queueOf(k)).remove(key, removed.jobId);
    await runtime
      .ticketOutbox()
      .hand(key, removed.settled)
      .catch((err: unknown) =>
        log(runtime.opts.logger, 'warn', 'batch-by-key: could not add ticket callbacks after a drop; the recovery sweep will', {
          err,
          key,
        }),
      );
    const { pending, inFlight, retrying, tickets } = removed;
    return { pending, inFlight, retrying, tickets, deadLetters: deadLetters ? await this.deadLetters.purge({ key }) : 0 };
  }

  /**
   * One recovery sweep; `graceMs` 0 from `recover()`, the recovery interval from a worker's timer;
   * with `full`, every key in Redis is listed first (see recovery.ts `listEveryKey`).
   */
  async recover(graceMs = 0, options?: RecoverOptions): Promise<number> {
    const { full } = recoverOptions(options);
    const deps = this.recoveryDeps(graceMs);
    if (full) await listEveryKey(deps);
    return recoverStrandedKeys(deps);
  }

  /**
   * A worker's timed sweep: a stretch of the walk over Redis (recovery.ts `KeyspaceWalk`: keys
   * listed nowhere, pointers left behind), then the index entries older than `graceMs`.
   */
  async sweep(graceMs: number): Promise<number> {
    const deps = this.recoveryDeps(graceMs);
    await this.walk.step(deps);
    return recoverStrandedKeys(deps);
  }

  async shardCounts(): Promise<ShardCount[]> {
    const { runtime } = this;
    return shardCounts(runtime.client(), await runtime.shardCounts.read(), runtime.opts.shards, runtime.shards);
  }

  async retireShardCount(count: number): Promise<void> {
    const { runtime } = this;
    // Checked before client(): nothing reaches Redis with a bad count (a missing one included).
    requiredInteger('retireShardCount count', count, 1, MAX_SHARDS);
    const [listed] = await shardCounts(runtime.client(), [count], runtime.opts.shards, runtime.shards);
    if (listed!.own || listed!.jobs > 0 || listed!.keys > 0)
      throw new ShardsInUseError(
        listed!.own
          ? `shard count ${count} is this batcher's own shards option: retire a count no process uses any more`
          : `shard count ${count} still has ${listed!.jobs} key jobs on its queues and ${listed!.keys} keys in its recovery indexes: ` +
              'retire it once they have run and the recovery sweep has dropped them (shardCounts() tells)',
      );
    const leftMs = await forgetShardCount(runtime.client(), runtime.keyspace.config, count);
    if (leftMs > 0)
      throw new ShardsInUseError(
        `shard count ${count} was checked by a process that may still push to it without checking again for ${leftMs} ms ` +
          '(its recoveryIntervalMs plus pushTimeoutMs): retire it once no process has used it for that long',
        leftMs,
      );
    runtime.shardCounts.forget();
    // Its queues were opened for the check above only (up to 64 connections): not kept until close.
    await runtime.shards.closeCount(count);
  }

  async pause(key: Key, options?: PauseOptions): Promise<void> {
    return pause(this.pauseDeps(), key, options);
  }

  async resume(key: Key): Promise<void> {
    return resume(this.pauseDeps(), key);
  }

  async paused(): Promise<PausedKey[]> {
    return paused(this.pauseDeps());
  }

  // The mark first, then the counts read after it: a process that records a new count either
  // finds the mark (and pauses its own queues; see agreement.ts) or is among the counts read.
  async pauseAll(): Promise<void> {
    await setPausedAll(this.runtime.client(), this.runtime.keyspace.config, true);
    await Promise.all(this.runtime.shards.all(await this.runtime.shardCounts.readAgain()).map((queue) => queue.pause()));
  }

  async resumeAll(): Promise<void> {
    await setPausedAll(this.runtime.client(), this.runtime.keyspace.config, false);
    await Promise.all(this.runtime.shards.all(await this.runtime.shardCounts.readAgain()).map((queue) => queue.resume()));
  }

  async setGlobalRateLimit(limit: RateLimit | null): Promise<void> {
    const { runtime } = this;
    await setGlobalRateLimit(runtime.client(), runtime.keyspace, limit);
    // This process follows at once; others at their next read (see engine/global-limits.ts).
    runtime.limits.heard(await recordedLimits(runtime.client(), runtime.keyspace.config));
    runtime.limits.changed();
  }

  async setGlobalConcurrency(n: number | null): Promise<void> {
    const { runtime } = this;
    await setGlobalConcurrency(runtime.client(), runtime.keyspace, n);
    runtime.limits.heard(await recordedLimits(runtime.client(), runtime.keyspace.config));
    runtime.limits.changed();
  }

  private pauseDeps(): PauseDeps {
    const { runtime } = this;
    const { opts } = runtime;
    return {
      client: runtime.client(),
      keyspace: runtime.keyspace,
      queue: (key) => runtime.queueOf(key),
      store: opts.store,
      fill: (key) => fillOf(opts.fill, key, opts.sliceSize),
      level: keyLevels(opts.priority, opts.logger),
      index: (key) => runtime.shards.forKey(key).index,
    };
  }

  private recoveryDeps(graceMs: number): RecoveryDeps {
    const { runtime } = this;
    return {
      tickets: runtime.ticketOutbox(),
      client: runtime.client(),
      counts: () => runtime.shardCounts.read(),
      shards: runtime.shards,
      keyspace: runtime.keyspace,
      store: runtime.store,
      graceMs,
      lockTtlMs: runtime.opts.lockTtlMs,
      level: keyLevels(runtime.opts.priority, runtime.opts.logger),
      logger: runtime.opts.logger,
    };
  }
}

/** `recover`'s options, checked before anything reaches Redis. */
function recoverOptions(options: RecoverOptions = {}): { full: boolean } {
  if (typeof options !== 'object' || options === null)
    throw new InvalidOptionError(`recover options must be an object, got ${describe(options)}`);
  onlyKnownOptions('recover options', options, optionNames<RecoverOptions>()(['full']));
  return { full: boolean('recover full', options.full, false) };
}

/** Ids at most in one page of `pending` (the reply of one script call). */
const MAX_PENDING_PAGE = 1000;

/** `pending`'s options, checked before anything reaches Redis: a set pages by cursor, the others by offset. */
function pageRequest(store: StoreKind, options: PendingOptions = {}): PageRequest {
  if (typeof options !== 'object' || options === null)
    throw new InvalidOptionError(`pending options must be an object, got ${describe(options)}`);
  onlyKnownOptions('pending options', options, optionNames<PendingOptions>()(['level', 'offset', 'cursor', 'limit']));
  const level = oneOf<PageRequest['levels']>('pending level', options.level, ['high', 'normal'], 'both');
  const limit = integer('pending limit', options.limit, 100, 1, MAX_PENDING_PAGE);
  if (store === 'set') {
    if (options.offset !== undefined)
      throw new InvalidOptionError(
        `pending offset is for the list and zset stores; this batcher's set store pages by cursor (pass the last page's next.cursor), got offset ${describe(options.offset)}`,
      );
    return { levels: level, offset: 0, cursor: setCursor(options.cursor, level), limit };
  }
  if (options.cursor !== undefined)
    throw new InvalidOptionError(
      `pending cursor is for the set store; this batcher's ${store} store pages by offset (pass the last page's next.offset), got cursor ${describe(options.cursor)}`,
    );
  return { levels: level, offset: integer('pending offset', options.offset, 0, 0), cursor: '', limit };
}

/** A set's cursor as `pending` returned it (see pending-page.lua), of a level the call lists. */
function setCursor(cursor: unknown, levels: 'both' | 'high' | 'normal'): string {
  if (cursor === undefined) return '';
  const level = typeof cursor === 'string' ? /^(high|normal) \d+ \d+$/.exec(cursor)?.[1] : undefined;
  if (typeof cursor !== 'string' || level === undefined || (levels !== 'both' && level !== levels))
    throw new InvalidOptionError(`pending cursor must be a next.cursor a pending call of the same level returned, got ${describe(cursor)}`);
  return cursor;
}

/** `drop`'s options, checked before anything reaches Redis. */
function dropOptions(options: DropOptions = {}): { deadLetters: boolean } {
  if (typeof options !== 'object' || options === null)
    throw new InvalidOptionError(`drop options must be an object, got ${describe(options)}`);
  onlyKnownOptions('drop options', options, optionNames<DropOptions>()(['deadLetters']));
  return { deadLetters: boolean('drop deadLetters', options.deadLetters, false) };
}
