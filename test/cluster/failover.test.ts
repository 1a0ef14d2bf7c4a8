import { Cluster, Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { batchByKey } from '../../src';
import { Keyspace } from '../../src/storage/keys';
import { ShardLayout } from '../../src/storage/shards';
import { defaultPrefix } from '../../src/options';
import { startCluster, type LocalCluster } from '../../tools/redis-cluster';
import { CLUSTER_OPTIONS, Recorder, track, uniqueName, waitFor } from '../helpers/redis';

/** A cluster of its own: a failover moves slots under every client, so other files must not share it. */
let cluster: LocalCluster;
beforeAll(async () => {
  cluster = await startCluster();
}, 90_000);
afterAll(async () => {
  await cluster?.stop();
});

type Node = { host: string; port: number };

/**
 * The master serving `slot` and its replicas, from CLUSTER NODES (CLUSTER SLOTS leaves out
 * replicas that have not replicated a write yet).
 */
async function servers(client: Cluster, slot: number): Promise<{ master: Node; replicas: Node[] }> {
  const nodes = String(await client.cluster('NODES'))
    .trim()
    .split('\n')
    .map((line) => {
      const [id, address, flags, masterId, , , , , ...slots] = line.split(' ');
      const [host, port] = address!.split('@')[0]!.split(':');
      return { id, masterId, flags: flags!, slots, node: { host: host!, port: Number(port) } };
    });
  const serves = (ranges: string[]) =>
    ranges.some((r) => {
      const [from, to = from] = r.split('-').map(Number);
      return from! <= slot && slot <= to!;
    });
  const master = nodes.find((n) => n.flags.includes('master') && serves(n.slots));
  if (!master) throw new Error(`no node serves slot ${slot}`);
  return { master: master.node, replicas: nodes.filter((n) => n.masterId === master.id).map((n) => n.node) };
}

const keyslot = async (client: Cluster, key: string): Promise<number> => Number(await client.cluster('KEYSLOT', key));

/** A key whose per-key data lives on `master`. */
async function keyServedBy(client: Cluster, keyspace: Keyspace, master: Node): Promise<string> {
  for (let i = 0; i < 1000; i++) {
    const key = `acct-${i}`;
    if ((await servers(client, await keyslot(client, keyspace.forKey(key).pending))).master.port === master.port) return key;
  }
  throw new Error(`no key of 1000 hashes to a slot of ${master.port}`);
}

async function role(node: Node): Promise<string> {
  const direct = new Redis({ ...node, lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null });
  try {
    await direct.connect();
    return String((await direct.role())[0]);
  } finally {
    direct.disconnect();
  }
}

describe('Redis Cluster failover', () => {
  it('CLUSTER FAILOVER of the master holding the key and the queue loses no acknowledged push', async () => {
    const rec = new Recorder();
    const name = uniqueName('failover');
    const client = track(new Cluster(cluster.nodes, CLUSTER_OPTIONS));
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
      const replica = replicas[0]!;
      const admin = track(new Redis(replica));
      // Without FORCE the replica first catches up with its master, which pauses its writers meanwhile.
      expect(await admin.cluster('FAILOVER')).toBe('OK');
      await waitFor(async () => (await role(replica)) === 'master' && (await role(master)) === 'slave', {
        what: 'the replica to take over',
        timeoutMs: 30_000,
      });
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

describe('Redis Cluster failover with shards', () => {
  it('CLUSTER FAILOVER of the master of one shard loses no acknowledged push to any shard', async () => {
    const rec = new Recorder();
    const name = uniqueName('failover-shards');
    const client = track(new Cluster(cluster.nodes, CLUSTER_OPTIONS));
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
      const replica = replicas[0]!;
      const admin = track(new Redis(replica));
      expect(await admin.cluster('FAILOVER')).toBe('OK');
      await waitFor(async () => (await role(replica)) === 'master' && (await role(master)) === 'slave', {
        what: 'the replica to take over',
        timeoutMs: 30_000,
      });
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
