import { Cluster } from 'ioredis';
import { describe, expect, it } from 'vitest';
import { batchByKey } from '../../src';
import { Keyspace } from '../../src/storage/keys';
import { ShardLayout } from '../../src/storage/shards';
import { defaultPrefix } from '../../src/options';
import { CLUSTER_OPTIONS, Recorder, track, uniqueName, waitFor } from '../helpers/redis';
import { failOver, keyslot, servers, ownCluster } from '../helpers/cluster';

const cluster = ownCluster();

describe('Redis Cluster failover with shards', () => {
  it('CLUSTER FAILOVER of the master of one shard loses no acknowledged push to any shard', async () => {
    const rec = new Recorder();
    const name = uniqueName('failover-shards');
    const client = track(new Cluster(cluster().nodes, CLUSTER_OPTIONS));
    const b = track(batchByKey({ name, connection: client, shards: 3, sliceSize: 20, eachIteration: rec.handler }));
    b.createWorker({ concurrency: 3 });
    const layout = new ShardLayout(defaultPrefix(name, true), name, new Keyspace(defaultPrefix(name, true), name), 3);
    // Shard 1's queue: its master is failed over; keys of every shard keep being pushed meanwhile.
    const { master, replicas } = await servers(client, await keyslot(client, layout.prefixes[1]!));
    const keys = Array.from({ length: 9 }, (_, i) => `acct-${i}`);

    const acknowledged = new Map<string, string[]>(keys.map((k) => [k, []]));
    let rejected = 0;
    let pushing = true;
    let pushes = 0;
    const pusher = (async () => {
      for (let n = 0; pushing; n++) {
        const key = keys[n % keys.length]!;
        const ids = Array.from({ length: 5 }, (_, i) => `${n}-${i}`);
        await b.performBatchLater(ids, { key }).then(
          () => {
            acknowledged.get(key)!.push(...ids);
            pushes++;
          },
          () => rejected++,
        );
      }
    })();

    try {
      await waitFor(() => pushes >= 200 && rec.all.length > 0, { what: 'pushes and processing before the failover' });
      await failOver(master, replicas[0]!);
      const atFailover = pushes;
      await waitFor(() => pushes >= atFailover + 400, { what: 'pushes after the failover', timeoutMs: 30_000 });
    } finally {
      pushing = false;
      await pusher;
    }

    await waitFor(
      () =>
        keys.every(
          (key) =>
            new Set(rec.idsOf(key)).size >= acknowledged.get(key)!.length &&
            acknowledged.get(key)!.every((id) => rec.idsOf(key).includes(id)),
        ),
      { what: 'every acknowledged id to be processed', timeoutMs: 60_000, intervalMs: 200 },
    );
    expect(rejected).toBe(0);
    expect(new Set(keys.map((key) => layout.of(key))).size).toBeGreaterThan(1);
  });
});
