import { Cluster } from 'ioredis';
import { describe, expect, it } from 'vitest';
import { batchByKey } from '../../src';
import { Keyspace } from '../../src/storage/keys';
import { defaultPrefix } from '../../src/options';
import { CLUSTER_OPTIONS, Recorder, track, uniqueName, waitFor } from '../helpers/redis';
import { failOver, keyslot, servers, type Node, ownCluster } from '../helpers/cluster';

const cluster = ownCluster();

/** A key whose per-key data lives on `master`. */
async function keyServedBy(client: Cluster, keyspace: Keyspace, master: Node): Promise<string> {
  for (let i = 0; i < 1000; i++) {
    const key = `acct-${i}`;
    if ((await servers(client, await keyslot(client, keyspace.forKey(key).pending))).master.port === master.port) return key;
  }
  throw new Error(`no key of 1000 hashes to a slot of ${master.port}`);
}

describe('Redis Cluster failover', () => {
  it('CLUSTER FAILOVER of the master holding the key and the queue loses no acknowledged push', async () => {
    const rec = new Recorder();
    const name = uniqueName('failover');
    const client = track(new Cluster(cluster().nodes, CLUSTER_OPTIONS));
    const prefix = defaultPrefix(name, true);
    // The key's data on the master of the BullMQ queue's slot (its prefix's tag), so the failover moves both.
    const { master, replicas } = await servers(client, await keyslot(client, prefix));
    const key = await keyServedBy(client, new Keyspace(prefix, name), master);

    const b = track(batchByKey({ name, connection: client, sliceSize: 20, eachIteration: rec.handler }));
    b.createWorker({ concurrency: 2 });

    const acknowledged: string[] = [];
    let rejected = 0;
    let pushing = true;
    const pusher = (async () => {
      for (let n = 0; pushing; n++) {
        const ids = Array.from({ length: 10 }, (_, i) => `${n}-${i}`);
        // A push that rejects was not acknowledged: its ids may or may not be processed.
        await b.performBatchLater(ids, { key }).then(
          () => acknowledged.push(...ids),
          () => rejected++,
        );
      }
    })();

    try {
      await waitFor(() => acknowledged.length >= 1000 && rec.all.length > 0, { what: 'pushes and processing before the failover' });
      await failOver(master, replicas[0]!);
      const atFailover = acknowledged.length;
      await waitFor(() => acknowledged.length >= atFailover + 2000, { what: 'pushes after the failover', timeoutMs: 30_000 });
    } finally {
      pushing = false;
      await pusher;
    }

    await waitFor(
      () => {
        const processed = new Set(rec.idsOf(key));
        return acknowledged.every((id) => processed.has(id));
      },
      { what: 'every acknowledged id to be processed', timeoutMs: 60_000, intervalMs: 100 },
    );
    expect(rejected).toBe(0);
  });
});
