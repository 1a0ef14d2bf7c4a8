import { ShardLayout } from './shards';
import type { KeyQueue } from './job';
import type { Keyspace } from './keys';
import type { Key } from '../core/types';

/**
 * A batcher's BullMQ queues, one per shard, opened on first use: those of its own shard count
 * (`shards`), where its pushes add key jobs, and those of other counts that processes recorded
 * (see agreement.ts recordedShardCounts), which its workers keep serving and its reads keep
 * reading until the count is forgotten.
 * @internal
 */
export class ShardQueues {
  private readonly layouts = new Map<number, ShardLayout>();
  private readonly queues = new Map<string, KeyQueue>();
  readonly own: ShardLayout;

  constructor(
    private readonly prefix: string,
    private readonly name: string,
    private readonly keyspace: Keyspace,
    count: number,
    /** Opens the queue of one shard, under its BullMQ prefix. */
    private readonly open: (prefix: string) => KeyQueue,
  ) {
    this.own = this.layout(count);
  }

  /** The layout of `count` shards (cached: picking its hash tags hashes a few hundred candidates). */
  layout(count: number): ShardLayout {
    let layout = this.layouts.get(count);
    if (!layout) {
      layout = new ShardLayout(this.prefix, this.name, this.keyspace, count);
      this.layouts.set(count, layout);
    }
    return layout;
  }

  /** The queue of shard `index` of `count` shards. */
  at(count: number, index: number): KeyQueue {
    const id = queueId(count, index);
    let queue = this.queues.get(id);
    if (!queue) {
      queue = this.open(this.layout(count).prefixes[index]!);
      this.queues.set(id, queue);
    }
    return queue;
  }

  /** The queue a key's job is added to: its shard's, of this batcher's count. */
  of(key: Key): KeyQueue {
    return this.at(this.own.count, this.own.of(key));
  }

  /** A push's view of the key's shard, its hash taken once: the queue of its job and its recovery index. */
  forKey(key: Key): { queue: KeyQueue; index: string } {
    const shard = this.own.of(key);
    return { queue: this.at(this.own.count, shard), index: this.own.indexes[shard]! };
  }

  /** Every queue of these counts. */
  all(counts: readonly number[]): KeyQueue[] {
    return counts.flatMap((count) => Array.from({ length: count }, (_, index) => this.at(count, index)));
  }

  /** Every recovery index of these counts. */
  indexes(counts: readonly number[]): string[] {
    return counts.flatMap((count) => this.layout(count).indexes);
  }

  /** The queue of the key's shard under each of these counts (a key's job may sit on any while a count changes). */
  ofKeyIn(counts: readonly number[], key: Key): KeyQueue[] {
    return counts.map((count) => this.at(count, this.layout(count).of(key)));
  }

  /**
   * Closes the queues of a count no process uses any more (a retired one) and forgets them: each
   * holds a connection, and a retired count's queues are never read again.
   */
  async closeCount(count: number): Promise<void> {
    const closing: Promise<void>[] = [];
    for (let index = 0; index < count; index++) {
      const id = queueId(count, index);
      const queue = this.queues.get(id);
      if (!queue) continue;
      this.queues.delete(id);
      closing.push(queue.close());
    }
    await Promise.all(closing);
  }

  /** The queues opened so far (to close them). */
  opened(): KeyQueue[] {
    return [...this.queues.values()];
  }
}

/** A queue's id among those opened: its shard count and index. */
function queueId(count: number, index: number): string {
  return `${count}.${index}`;
}
