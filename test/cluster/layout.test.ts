import type { Cluster } from 'ioredis';
import { describe, expect, it } from 'vitest';
import { keyspaceOf, keysMatching, range, Recorder, redisClient, testBatcher, waitFor } from '../helpers/redis';

describe('key layout on a Redis Cluster, with no prefix given', () => {
  it('puts the BullMQ queue in one slot tagged with the name and spreads per-key data over the masters', async () => {
    const rec = new Recorder();
    const b = testBatcher({ eachIteration: rec.handler });
    const keys = range(30, 'acct-');
    for (const key of keys) await b.performBatchLater(['1'], { key });
    const client = redisClient() as Cluster;

    const queueKeys = await keysMatching(`bull:{${b.name}}:${b.name}:*`);
    expect(queueKeys.length).toBeGreaterThan(0);
    const slots = await Promise.all(queueKeys.map(async (k) => Number(await client.cluster('KEYSLOT', k))));
    expect(new Set(slots).size).toBe(1);

    // 30 keys whose data all sat on one master would mean the user's key is not our hash tag.
    const pending = `${keyspaceOf(b).root}:{*}:pending`;
    const perMaster = await Promise.all(client.nodes('master').map(async (node) => (await node.keys(pending)).length));
    expect(perMaster).toHaveLength(3);
    expect(perMaster.every((n) => n > 0)).toBe(true);
    expect(perMaster.reduce((a, n) => a + n)).toBe(keys.length);

    b.createWorker({ concurrency: 4 });
    await waitFor(() => rec.all.length === keys.length);
  });

  it("with shards: 3, puts each shard's queue and index on a master of its own, and serves them all", async () => {
    const rec = new Recorder();
    const b = testBatcher({ shards: 3, eachIteration: rec.handler });
    const keys = range(30, 'acct-');
    for (const key of keys) await b.performBatchLater(['1'], { key });
    const client = redisClient() as Cluster;
    const masterOf = async (name: string) => {
      const slot = Number(await client.cluster('KEYSLOT', name));
      const ranges = await client.cluster('SLOTS');
      return ranges.find(([from, to]) => from <= slot && slot <= to)![2]![1];
    };
    const queueKeys = await keysMatching(`bull:${b.name}:{${b.name}#*}:${b.name}:*`);
    const masters = new Set(await Promise.all(queueKeys.map(masterOf)));
    expect(masters.size).toBe(3);
    const indexes = await keysMatching(`${keyspaceOf(b).root}:{${b.name}#*}:keys`);
    expect(indexes).toHaveLength(3);
    expect(new Set(await Promise.all(indexes.map(masterOf))).size).toBe(3);

    b.createWorker({ concurrency: 4 });
    await waitFor(() => rec.all.length === keys.length);
  });
});
