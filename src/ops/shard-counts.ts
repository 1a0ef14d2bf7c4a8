import { LIVE_STATES } from '../storage/job';
import type { ShardQueues } from '../storage/shard-queues';
import type { RedisClient } from '../storage/scripts';
import type { ShardCount } from '../core/types';

/**
 * Each of these shard counts, with the jobs its queues hold (one job-counts read per queue) and
 * the keys its recovery indexes still list (one ZCARD per index).
 */
export async function shardCounts(client: RedisClient, counts: readonly number[], own: number, shards: ShardQueues): Promise<ShardCount[]> {
  return Promise.all(
    counts.map(async (count) => {
      const [perQueue, perIndex] = await Promise.all([
        Promise.all(shards.all([count]).map(async (queue) => queue.getJobCounts(...LIVE_STATES))),
        Promise.all(shards.indexes([count]).map(async (index) => client.zcard(index))),
      ]);
      const jobs = perQueue.reduce((sum, byState) => sum + Object.values(byState).reduce((a, n) => a + n, 0), 0);
      return { count, own: count === own, jobs, keys: perIndex.reduce((a, n) => a + n, 0) };
    }),
  );
}
