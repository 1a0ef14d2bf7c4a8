import { recordedShardCounts } from '../storage/agreement';
import type { RedisClient } from '../storage/scripts';

/**
 * The shard counts of a batcher that its processes recorded, and this process's own: the shards
 * workers serve and reads read (see storage/agreement.ts). A read under way is shared by the calls
 * made meanwhile (a worker's sweep asks three times at once), and the counts last read are kept
 * for what may not wait for Redis (a run's preemption reads the wait lists of every count served).
 */
export class ShardCounts {
  private last: readonly number[];
  private reading: Promise<number[]> | undefined;

  constructor(
    private readonly client: () => RedisClient,
    private readonly config: string,
    private readonly own: number,
  ) {
    this.last = [own];
  }

  /** Every count recorded, and this process's; a read under way is shared. */
  read(): Promise<number[]> {
    return (this.reading ??= this.readAgain().finally(() => (this.reading = undefined)));
  }

  /** A read of its own, not shared with one under way (which may have begun before a change). */
  async readAgain(): Promise<number[]> {
    const recorded = await recordedShardCounts(this.client(), this.config);
    const read = recorded.includes(this.own) ? recorded : [...recorded, this.own].sort((a, b) => a - b);
    this.last = read;
    return read;
  }

  /** The counts last read (no Redis call). */
  served(): readonly number[] {
    return this.last;
  }

  /** Drops a read under way, which began before a change of the counts and would answer without it. */
  forget(): void {
    this.reading = undefined;
  }
}
