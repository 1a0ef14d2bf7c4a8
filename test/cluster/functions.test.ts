import { Cluster, Redis } from 'ioredis';
import { describe, expect, it } from 'vitest';
import { batchByKey } from '../../src';
import { Keyspace } from '../../src/storage/keys';
import { defaultPrefix } from '../../src/options';
import { scriptLibrary, scriptMode } from '../../src/storage/scripts';
import { CLUSTER_OPTIONS, Recorder, track, uniqueName, waitFor } from '../helpers/redis';
import { allowPartialCoverage, keyslot, ownCluster, role, servers, sigkill, type Node } from '../helpers/cluster';

/**
 * The scripts as Redis functions on a Cluster (see storage/scripts/index.ts): a client loads the
 * library on every master; replicas get it from theirs, so a failover keeps it; a master without
 * it (FUNCTION FLUSH, a node restarted empty) has it loaded again by the first call it refuses.
 * A cluster of this file's own: a test kills a master.
 */
const cluster = ownCluster();

async function hasLibrary(node: Node): Promise<boolean> {
  const direct = new Redis({ ...node, lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null });
  try {
    await direct.connect();
    return ((await direct.call('FUNCTION', 'LIST', 'LIBRARYNAME', scriptLibrary().name)) as unknown[]).length === 1;
  } finally {
    direct.disconnect();
  }
}

/** A batcher on its own Cluster client, and the master (with its replica) that holds `key`'s data. */
async function setUp(key: string) {
  const client = track(new Cluster(cluster().nodes, CLUSTER_OPTIONS));
  const name = uniqueName('fn');
  const rec = new Recorder();
  const b = track(batchByKey({ name, connection: client, lockTtlMs: 2_000, recoveryIntervalMs: 1_000, eachIteration: rec.handler }));
  const pending = new Keyspace(defaultPrefix(name, true), name).forKey(key).pending;
  const { master, replicas } = await servers(client, await keyslot(client, pending));
  return { client, b, rec, master, replica: replicas[0]! };
}

describe('scripts as Redis functions on a Cluster', () => {
  it('are loaded on every master by the first call; replicas get them from their master', async () => {
    const { client, b } = await setUp('k');
    await b.performBatchLater(['1'], { key: 'k' });
    expect(scriptMode(client)).toBe('functions');
    for (const node of cluster().nodes) await waitFor(() => hasLibrary(node), { what: `the library on ${node.port}` });
  });

  it('a master that lost them (FUNCTION FLUSH) gets them again from the first call it refuses, and pushes and runs go on', async () => {
    const { b, rec, master } = await setUp('k');
    await b.performBatchLater(['0'], { key: 'k' });
    const admin = track(new Redis(master));
    await admin.call('FUNCTION', 'FLUSH');
    expect(await hasLibrary(master)).toBe(false);
    await b.performBatchLater(['1'], { key: 'k' });
    expect(await hasLibrary(master)).toBe(true);
    b.createWorker();
    await waitFor(() => rec.all.length === 2, { what: 'both ids' });
    expect(rec.idsOf('k')).toEqual(['0', '1']);
  });

  it('a master SIGKILLed: its replica takes over with the functions, and pushes and runs go on', async () => {
    // Only the killed master's slots go down (see master-killed.test.ts).
    await allowPartialCoverage(cluster().nodes);
    const { b, rec, master, replica } = await setUp('k');
    await b.performBatchLater(['before'], { key: 'k' });
    b.createWorker();
    await waitFor(() => rec.all.length === 1, { what: 'the id pushed before the kill' });
    await waitFor(() => hasLibrary(replica), { what: 'the library on the replica' });
    await sigkill(master);
    await waitFor(async () => (await role(replica).catch(() => '')) === 'master', {
      what: 'the replica to take over',
      timeoutMs: 30_000,
      intervalMs: 200,
    });
    expect(await hasLibrary(replica)).toBe(true);
    // A push may fail while the client learns the new layout; one that resolves is stored and runs.
    await waitFor(
      () =>
        b.performBatchLater(['after'], { key: 'k' }).then(
          () => true,
          () => false,
        ),
      {
        what: 'a push to the new master',
        timeoutMs: 30_000,
        intervalMs: 200,
      },
    );
    await waitFor(() => rec.all.includes('after'), { what: 'the id pushed after the takeover', timeoutMs: 30_000 });
  });
});
