import { StoreMismatchError } from '../core/errors';
import type { RedisClient } from './scripts';
import type { StoreKind } from '../core/types';

/** The field of the batcher's config hash that holds its store. */
const STORE_FIELD = 'store';

/** Fields `shards:N` of the config hash: the shard counts processes have used (see recordedShardCounts). */
const SHARDS_FIELD = 'shards:';

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

/** Drops a recorded shard count: workers stop serving its queues at their next sweep. */
export async function forgetShardCount(client: RedisClient, configKey: string, count: number): Promise<void> {
  await client.hdel(configKey, `${SHARDS_FIELD}${count}`);
}

/**
 * The store is the one option a batcher's producers and workers cannot disagree on: a list read
 * as a set fails with WRONGTYPE, and a push may land half in one shape. The first batcher to push
 * or run records its store under the batcher's config key; every other process compares with
 * it (at its first push, or its first run, then at most once per `recheckMs`), and refuses to go
 * on if it differs. Changing a batcher's store means draining it and deleting that key. Each
 * check also records the process's shard count again: a process still on a count that was
 * retired (see forgetShardCount) puts it back within `recheckMs`, so workers serve its queues
 * and sweep its recovery indexes again, and nothing it pushes is stranded.
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
    /** How often, at most, the check is made again (one MULTI): the batcher's recoveryIntervalMs. */
    private readonly recheckMs: number,
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
    const replies = await this.client()
      .multi()
      .hsetnx(this.configKey, STORE_FIELD, this.store)
      .hget(this.configKey, STORE_FIELD)
      .hset(this.configKey, `${SHARDS_FIELD}${this.shards}`, '1')
      .exec();
    const recorded = replies?.[1]?.[1];
    if (typeof recorded === 'string' && recorded !== this.store) {
      throw new StoreMismatchError(
        `this batcher ${side === 'push' ? 'pushes' : 'runs'} with store '${this.store}', but the batcher's producers and workers use ` +
          `'${recorded}' ` +
          `(recorded in ${this.configKey}): give every process the same store (after draining, delete that key to change it)`,
      );
    }
  }
}
