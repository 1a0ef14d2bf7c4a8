import { StoreMismatchError } from '../core/errors';
import { callScript, runScript, type RedisClient } from './scripts';
import type { LimitsInForce } from './limits-protocol';
import type { StoreKind } from '../core/types';

/** The field of the batcher's config hash that holds its store. */
const STORE_FIELD = 'store';

/**
 * Fields `shards:N` of the config hash: the shard counts processes have used (see
 * recordedShardCounts), each with the time, by the Redis clock, until which a process that
 * recorded it may push without checking again (see agree.lua).
 */
const SHARDS_FIELD = 'shards:';

/** The field of the config hash that says every queue of every count is paused (`pauseAll`, until `resumeAll`). */
const PAUSED_ALL_FIELD = 'paused';

/**
 * The fields of the config hash that hold the batcher-wide limits: `globalRateLimit` as
 * `max/durationMs`, `globalConcurrency` as a number; either 'off' once turned off at run time
 * (so that a process started with the option later does not turn it back on).
 */
export const LIMIT_FIELDS = { rate: 'globalRateLimit', concurrency: 'globalConcurrency' } as const;

const OFF = 'off';

/** A limit as the config hash holds it (see LIMIT_FIELDS); '' for none given. */
export function limitValues(limits: LimitsInForce): { rate: string; concurrency: string } {
  return {
    rate: limits.rate ? `${limits.rate.max}/${limits.rate.durationMs}` : '',
    concurrency: limits.concurrency ? String(limits.concurrency) : '',
  };
}

/** The limits the config hash holds (a value this version cannot read counts as none). */
export function limitsOf(rate: string | null | undefined, concurrency: string | null | undefined): LimitsInForce {
  const [max, durationMs] = (rate ?? '').split('/').map(Number);
  const cap = Number(concurrency);
  return {
    ...(max! >= 1 && durationMs! >= 1 && { rate: { max: max!, durationMs: durationMs! } }),
    ...(Number.isInteger(cap) && cap >= 1 && { concurrency: cap }),
  };
}

/** Sets a batcher-wide limit in the config hash (undefined: turns it off); workers read it at their next check. */
export async function recordLimit(
  client: RedisClient,
  configKey: string,
  which: keyof LimitsInForce,
  limits: LimitsInForce,
): Promise<void> {
  await client.hset(configKey, LIMIT_FIELDS[which], limitValues(limits)[which] || OFF);
}

/** The batcher-wide limits recorded in the config hash. */
export async function recordedLimits(client: RedisClient, configKey: string): Promise<LimitsInForce> {
  return (await limitsRecord(client, configKey)) ?? {};
}

/**
 * The batcher-wide limits recorded in the config hash, or undefined when it holds no record at
 * all: lost with Redis's data (a restart without persistence, a failover to an empty replica),
 * not turned off (a limit turned off is recorded as such). The next store check records its
 * process's options again.
 */
export async function limitsRecord(client: RedisClient, configKey: string): Promise<LimitsInForce | undefined> {
  const [store, rate, concurrency] = await client.hmget(configKey, STORE_FIELD, LIMIT_FIELDS.rate, LIMIT_FIELDS.concurrency);
  return store === null && rate === null && concurrency === null ? undefined : limitsOf(rate, concurrency);
}

/**
 * The store recorded for a batcher (see StoreAgreement): what its first process to push or run
 * used. Undefined while none has, or after someone deleted the record to change the store. Read
 * as it is: a value this version does not know is the caller's to refuse.
 */
export async function recordedStore(client: RedisClient, configKey: string): Promise<string | undefined> {
  return (await client.hget(configKey, STORE_FIELD)) ?? undefined;
}

/**
 * The shard counts (`shards`) the batcher's processes have pushed or run with, ascending: each
 * process records its own with its store (StoreAgreement), and workers serve the queues of every
 * count recorded, so a change of `shards` strands no job on a queue nobody serves (see
 * docs/sharding.md). A count stays recorded until `forgetShardCount` drops it.
 */
export async function recordedShardCounts(client: RedisClient, configKey: string): Promise<number[]> {
  const fields = await client.hkeys(configKey);
  return fields
    .filter((f) => f.startsWith(SHARDS_FIELD))
    .map((f) => Number(f.slice(SHARDS_FIELD.length)))
    .filter((n) => Number.isInteger(n) && n >= 1)
    .sort((a, b) => a - b);
}

/**
 * Drops a recorded shard count, so workers stop serving its queues at their next sweep; unless a
 * process that recorded it may still push to it without checking again (its last check was
 * within its `recoveryIntervalMs` plus `pushTimeoutMs`): such a push would land on a count nobody
 * serves or reads. Returns 0 when dropped, else the ms until it may be.
 */
export async function forgetShardCount(client: RedisClient, configKey: string, count: number): Promise<number> {
  return Number(await runScript(client, 'forget-shard-count', [configKey], [`${SHARDS_FIELD}${count}`]));
}

/** Records (or clears) that every queue is paused: processes that check later pause their own count's queues too. */
export async function setPausedAll(client: RedisClient, configKey: string, paused: boolean): Promise<void> {
  if (paused) await client.hset(configKey, PAUSED_ALL_FIELD, '1');
  else await client.hdel(configKey, PAUSED_ALL_FIELD);
}

async function pausedAll(client: RedisClient, configKey: string): Promise<boolean> {
  return (await client.hexists(configKey, PAUSED_ALL_FIELD)) === 1;
}

/** A process's own count's queues, as the agreement pauses them under `pauseAll` (see `StoreAgreement`). */
export interface OwnQueues {
  pause(): Promise<void>;
  resume(): Promise<void>;
}

/**
 * The store is the one option a batcher's producers and workers cannot disagree on: a list read
 * as a set fails with WRONGTYPE, and a push may land half in one shape. The first batcher to push
 * or run records its store under the batcher's config key; every other process compares with
 * it (at its first push, or its first run, then at most once per `recheckMs`), and refuses to go
 * on if it differs.
 *
 * Each check also records the process's shard count, with the time until which the process may
 * push without checking again: a count cannot be retired before then (see forgetShardCount), and
 * a process still on a count that was retired puts it back at its next check, so workers serve its
 * queues and sweep its recovery indexes again, and nothing it pushes is stranded. And each check
 * reads whether `pauseAll` holds: a process whose count appeared after the pause (a change of
 * `shards`) pauses its own count's queues before it pushes or runs anything.
 */
export class StoreAgreement {
  private agreed: Promise<void> | undefined;
  private checkedAt = 0;

  constructor(
    private readonly client: () => RedisClient,
    private readonly configKey: string,
    private readonly store: StoreKind,
    /** This process's shard count, recorded with the store (see recordedShardCounts). */
    private readonly shards: number,
    /** How often, at most, the check is made again (one script call): the batcher's recoveryIntervalMs. */
    private readonly recheckMs: number,
    /** The longest a push may take after its check: the batcher's pushTimeoutMs. */
    private readonly pushTimeoutMs: number,
    /** The queues of this process's count. */
    private readonly own: OwnQueues,
    /**
     * The batcher-wide limits: this process's options (recorded when the hash has none yet), and
     * who hears what the hash holds at each check.
     */
    private readonly limits?: { defaults: LimitsInForce; heard: (limits: LimitsInForce) => void },
  ) {}

  /** Resolves once this process's store is the recorded one; a StoreMismatchError if it is not (asked again next time). */
  check(side: 'push' | 'worker'): Promise<void> {
    if (this.agreed && Date.now() - this.checkedAt > this.recheckMs) this.agreed = undefined;
    if (!this.agreed) this.checkedAt = Date.now();
    this.agreed ??= this.compare(side).catch((err: unknown) => {
      this.agreed = undefined;
      throw err;
    });
    return this.agreed;
  }

  private async compare(side: 'push' | 'worker'): Promise<void> {
    const defaults = limitValues(this.limits?.defaults ?? {});
    const [recorded, paused, rate, concurrency] = (await callScript(this.client(), 'agree', [this.configKey], {
      storeField: STORE_FIELD,
      store: this.store,
      shardsField: `${SHARDS_FIELD}${this.shards}`,
      validForMs: this.recheckMs + this.pushTimeoutMs,
      pausedAllField: PAUSED_ALL_FIELD,
      rateField: LIMIT_FIELDS.rate,
      rateDefault: defaults.rate,
      concurrencyField: LIMIT_FIELDS.concurrency,
      concurrencyDefault: defaults.concurrency,
    })) as [string, number, string | null, string | null];
    if (recorded !== this.store) {
      throw new StoreMismatchError(
        `this batcher ${side === 'push' ? 'pushes' : 'runs'} with store '${this.store}', but the batcher's producers and workers use ` +
          `'${recorded}' ` +
          `(recorded in ${this.configKey}): give every process the same store (after draining, delete that key to change it)`,
      );
    }
    this.limits?.heard(limitsOf(rate, concurrency));
    if (paused === 1) await this.followPausedAll();
  }

  /**
   * Pauses this process's own queues, as `pauseAll` paused those of the counts it knew. A
   * `resumeAll` may clear the mark meanwhile, after resuming the queues it knew: so the mark is read
   * again after each change, until the queues are as the mark was last read (a few rounds at most).
   */
  private async followPausedAll(): Promise<void> {
    let paused = true;
    for (let round = 0; round < 5; round++) {
      await (paused ? this.own.pause() : this.own.resume());
      const now = await pausedAll(this.client(), this.configKey);
      if (now === paused) return;
      paused = now;
    }
  }
}
