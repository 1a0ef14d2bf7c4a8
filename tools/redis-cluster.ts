import { spawn, spawnSync } from 'node:child_process';
import { createServer } from 'node:net';
import { Redis } from 'ioredis';
import { freePort, startRedis, type LocalRedis } from './redis-server';

/** A throwaway Redis Cluster on loopback for tests: masters with one replica each, no data kept. */
export interface LocalCluster {
  /** Every node (masters and replicas), as ioredis `Cluster` startup nodes. */
  nodes: { host: string; port: number }[];
  stop(): Promise<void>;
}

export interface ClusterOptions {
  masters?: number;
  replicasPerMaster?: number;
  /** For the whole start: processes, `--cluster create`, and the wait until every node agrees. */
  timeoutMs?: number;
}

const HOST = '127.0.0.1';
/** Redis Cluster's bus listens on the client port + 10000 unless told otherwise (Redis 7 only). */
const BUS_PORT_OFFSET = 10_000;
const SLOTS = 16_384;
/**
 * How long a node may be unreachable before the others consider it failed. Redis' 15 s default
 * would make a slow, shared CI machine wait needlessly; much lower risks false failovers there.
 */
const NODE_TIMEOUT_MS = 5_000;

/** A free port whose bus port is free too (and valid), so this works on Redis 6.2 as well as 7. */
async function freeNodePort(taken: ReadonlySet<number>): Promise<number> {
  for (let tries = 0; tries < 100; tries++) {
    const port = await freePort();
    if (port + BUS_PORT_OFFSET > 65_535 || taken.has(port) || taken.has(port + BUS_PORT_OFFSET)) continue;
    if (await isFree(port + BUS_PORT_OFFSET)) return port;
  }
  throw new Error('no free port pair (port, port + 10000) for a cluster node after 100 tries');
}

function isFree(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const server = createServer();
    server.unref();
    server.once('error', () => resolve(false));
    server.listen(port, HOST, () => server.close(() => resolve(true)));
  });
}

function run(command: string, args: string[], timeoutMs: number): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, { stdio: ['ignore', 'pipe', 'pipe'] });
    let output = '';
    child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()));
    const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
    child.once('error', reject);
    child.once('exit', (code, signal) => {
      clearTimeout(timer);
      if (code === 0) resolve(output);
      else reject(new Error(`${command} ${args.join(' ')} failed (${signal ?? `exit ${code}`}):\n${output}`));
    });
  });
}

/**
 * What keeps a node from being usable, or undefined once it sees every slot served, every other
 * node as a healthy master or replica, and its own replication up.
 */
async function notReady(port: number, expectedNodes: number, expectedReplicas: number): Promise<string | undefined> {
  const client = new Redis({ host: HOST, port, lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null });
  client.on('error', () => {});
  try {
    await client.connect();
    const info = await client.cluster('INFO');
    const field = (name: string) => new RegExp(`^${name}:(\\S+)`, 'm').exec(info)?.[1];
    if (field('cluster_state') !== 'ok') return `cluster_state:${field('cluster_state')}`;
    if (Number(field('cluster_slots_ok')) !== SLOTS) return `cluster_slots_ok:${field('cluster_slots_ok')}`;
    if (Number(field('cluster_known_nodes')) !== expectedNodes) return `cluster_known_nodes:${field('cluster_known_nodes')}`;
    // Gossip spreads who replicates whom after the nodes meet; until then clients see no replicas.
    const flags = String(await client.cluster('NODES'))
      .trim()
      .split('\n')
      .map((line) => line.split(' ')[2] ?? '');
    const replicasSeen = flags.filter((f) => f.includes('slave')).length;
    if (replicasSeen !== expectedReplicas) return `sees ${replicasSeen} of ${expectedReplicas} replicas`;
    const unhealthy = flags.find((f) => /fail|handshake|noaddr/.test(f));
    if (unhealthy) return `a node is flagged ${unhealthy}`;
    const replication = await client.info('replication');
    // A replica that has not finished its first sync cannot take over in a failover.
    if (/^role:slave/m.test(replication) && !/^master_link_status:up/m.test(replication)) return 'replica link not up';
    return undefined;
  } catch (err) {
    return (err as Error).message;
  } finally {
    client.disconnect();
  }
}

async function waitUntilReady(ports: number[], replicas: number, deadline: number): Promise<void> {
  for (;;) {
    const states = await Promise.all(ports.map((port) => notReady(port, ports.length, replicas)));
    if (states.every((s) => s === undefined)) return;
    if (Date.now() > deadline) {
      const detail = ports.map((port, i) => `  ${port}: ${states[i] ?? 'ready'}`).join('\n');
      throw new Error(`the Redis Cluster did not become ready in time:\n${detail}`);
    }
    await new Promise((r) => setTimeout(r, 100));
  }
}

/**
 * Starts `masters × (1 + replicasPerMaster)` redis-servers with `cluster-enabled yes` on free
 * loopback ports, joins them with `redis-cli --cluster create`, and resolves once every node
 * reports `cluster_state:ok`, all slots served and its replica link up. On any failure the
 * started servers are stopped before the error is thrown.
 */
export async function startCluster({ masters = 3, replicasPerMaster = 1, timeoutMs = 60_000 }: ClusterOptions = {}): Promise<LocalCluster> {
  const deadline = Date.now() + timeoutMs;
  if (spawnSync('redis-cli', ['--version'], { stdio: 'ignore' }).status !== 0) {
    throw new Error('redis-cli was not found on PATH; it comes with redis-server (sudo apt-get install -y redis-server)');
  }
  const taken = new Set<number>();
  const ports: number[] = [];
  for (let i = 0; i < masters * (1 + replicasPerMaster); i++) {
    const port = await freeNodePort(taken);
    taken.add(port).add(port + BUS_PORT_OFFSET);
    ports.push(port);
  }
  const servers: LocalRedis[] = [];
  const stop = async () => {
    await Promise.all(servers.splice(0).map((s) => s.stop()));
  };
  try {
    const args = ['--cluster-enabled', 'yes', '--cluster-config-file', 'nodes.conf', '--cluster-node-timeout', String(NODE_TIMEOUT_MS)];
    const started = await Promise.allSettled(ports.map((port) => startRedis(args, port)));
    for (const s of started) if (s.status === 'fulfilled') servers.push(s.value);
    const failed = started.find((s) => s.status === 'rejected');
    if (failed) throw failed.reason;
    await run(
      'redis-cli',
      ['--cluster', 'create', ...ports.map((p) => `${HOST}:${p}`), '--cluster-replicas', String(replicasPerMaster), '--cluster-yes'],
      Math.max(1_000, deadline - Date.now()),
    );
    await waitUntilReady(ports, masters * replicasPerMaster, deadline);
  } catch (err) {
    await stop();
    throw err;
  }
  return { nodes: ports.map((port) => ({ host: HOST, port })), stop };
}
