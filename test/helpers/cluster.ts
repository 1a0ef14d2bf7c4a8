import { Redis, type Cluster } from 'ioredis';
import { afterAll, beforeAll, expect } from 'vitest';
import { startCluster, type LocalCluster } from '../../tools/redis-cluster';
import { track, waitFor } from './redis';

/** Tools of the failover tests (test/cluster/failover*.test.ts): which node serves what, and a failover. */

export type Node = { host: string; port: number };

/**
 * The master serving `slot` and its replicas, from CLUSTER NODES (CLUSTER SLOTS leaves out
 * replicas that have not replicated a write yet).
 */
export async function servers(client: Cluster, slot: number): Promise<{ master: Node; replicas: Node[] }> {
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

export const keyslot = async (client: Cluster, key: string): Promise<number> => Number(await client.cluster('KEYSLOT', key));

export async function role(node: Node): Promise<string> {
  const direct = new Redis({ ...node, lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null });
  try {
    await direct.connect();
    return String((await direct.role())[0]);
  } finally {
    direct.disconnect();
  }
}

/** SIGKILLs the redis-server at `node` (a test's own, by the pid it reports), as a crash would: no shutdown, no last reply. */
export async function sigkill(node: Node): Promise<void> {
  const direct = new Redis({ ...node, lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null });
  let pid: number;
  try {
    await direct.connect();
    pid = Number(/^process_id:(\d+)/m.exec(await direct.info('server'))?.[1]);
  } finally {
    direct.disconnect();
  }
  if (!Number.isInteger(pid) || pid <= 0) throw new Error(`no process_id in INFO of ${node.host}:${node.port}`);
  process.kill(pid, 'SIGKILL');
}

/**
 * Lets a cluster serve the slots it still has while a master is down: with full coverage required
 * (Redis's default), every node answers CLUSTERDOWN from the moment a master is marked failed
 * until its replica takes over, and a command fails before it reaches a live master.
 */
export async function allowPartialCoverage(nodes: readonly Node[]): Promise<void> {
  for (const node of nodes) {
    const admin = new Redis(node);
    try {
      await admin.config('SET', 'cluster-require-full-coverage', 'no');
    } finally {
      admin.disconnect();
    }
  }
}

/** Promotes `replica` with CLUSTER FAILOVER and waits until it is master and `master` its replica. */
export async function failOver(master: Node, replica: Node): Promise<void> {
  const admin = track(new Redis(replica));
  // Without FORCE the replica first catches up with its master, which pauses its writers meanwhile.
  expect(await admin.cluster('FAILOVER')).toBe('OK');
  await waitFor(async () => (await role(replica)) === 'master' && (await role(master)) === 'slave', {
    what: 'the replica to take over',
    timeoutMs: 30_000,
  });
}

/**
 * A cluster of the calling test file's own (started before its tests, stopped after): a failover
 * moves slots under every client, and a second one soon after on the same nodes may not start.
 */
export function ownCluster(): () => LocalCluster {
  let cluster: LocalCluster | undefined;
  beforeAll(async () => {
    cluster = await startCluster();
  }, 90_000);
  afterAll(async () => {
    await cluster?.stop();
  });
  return () => {
    if (!cluster) throw new Error('ownCluster: called outside a test');
    return cluster;
  };
}
