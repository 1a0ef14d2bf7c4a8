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
});
