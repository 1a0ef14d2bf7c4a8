import calculateSlot from 'cluster-key-slot';
import { encodeKey, type Keyspace } from './keys';
import type { Key } from '../core/types';

/** A batcher's `shards` at most: each shard costs every worker process two connections per master it lands on. */
export const MAX_SHARDS = 64;

/** Redis Cluster's hash slots. */
export const CLUSTER_SLOTS = 16_384;

/**
 * The hash-tag text of shard `shard` of `count` (count > 1): the first candidate, in a fixed
 * order, whose slot sits in the middle half of the shard's own 1/count of the slots. A cluster
 * splits its slots into equal ranges, one per master, so with `count` a multiple of the masters
 * every master carries the same number of shards, and a range that is off by a few slots (a
 * resharding, an uneven split) still keeps each tag inside one range. Candidates are the
 * batcher's name, the count, the shard, and a counter: deterministic, so every process, whatever
 * its topology, picks the same tags.
 */
export function shardTag(name: string, count: number, shard: number): string {
  const width = CLUSTER_SLOTS / count;
  const low = shard * width + width / 4;
  const high = shard * width + (3 * width) / 4;
  for (let n = 0; ; n++) {
    const tag = `${name}#${count}.${shard}.${n}`;
    const slot = calculateSlot(tag);
    if (slot >= low && slot < high) return tag;
  }
}

/**
 * Where a batcher's key jobs live when it has `count` shards: one BullMQ queue per shard, all
 * named as the batcher, each under a prefix of its own. With one shard, the queue is the
 * batcher's prefix as given (the layout of a batcher without shards, so adding the option later
 * moves nothing). With more, shard i's prefix is the given one without its braces followed by a
 * hash tag of its own (`shardTag`), which spreads the shards' queues over a Cluster's masters.
 * The recovery index (keys with recent pushes) is split the same way, one per shard, in its
 * shard's slot: on a Cluster a push writes it beside its job.
 */
export class ShardLayout {
  readonly prefixes: readonly string[];
  readonly indexes: readonly string[];

  constructor(
    prefix: string,
    name: string,
    /** The batcher's keyspace: its root, and the index of a batcher without shards. */
    keyspace: Pick<Keyspace, 'root' | 'index'>,
    readonly count: number,
  ) {
    if (count === 1) {
      this.prefixes = [prefix];
      this.indexes = [keyspace.index];
    } else {
      const bare = prefix.replace(/[{}]/g, '');
      const tags = Array.from({ length: count }, (_, shard) => `{${shardTag(name, count, shard)}}`);
      this.prefixes = tags.map((tag) => `${bare}:${tag}`);
      this.indexes = tags.map((tag) => `${keyspace.root}:${tag}:keys`);
    }
  }

  /** The shard of a key: a stable hash of the key (its Cluster slot's, of the encoded key) modulo the count. */
  of(key: Key): number {
    return this.count === 1 ? 0 : calculateSlot(encodeKey(key)) % this.count;
  }
}
