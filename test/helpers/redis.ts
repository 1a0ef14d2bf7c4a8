import { randomBytes } from 'node:crypto';
import { Queue, type ConnectionOptions } from 'bullmq';
import { Cluster, Redis, type ClusterOptions } from 'ioredis';
import { afterAll, beforeAll, inject } from 'vitest';
import { startRedis, type LocalRedis } from '../../tools/redis-server';
import { batchByKey, type Batcher, type BatchByKeyOptions, type EachIteration, type KeyJobData } from '../../src';
import { Keyspace } from '../../src/storage/keys';
import { defaultPrefix } from '../../src/options';

/** The standalone server's URL; a run on the cluster (vitest.cluster.config.mts) has none. */
export function redisUrl(): string {
  const url = inject('redisUrl');
  if (url === undefined) throw new Error('this test needs a standalone Redis (redisUrl), which the cluster run does not provide');
  return url;
}

/** Set when the suite runs against a Redis Cluster (test/helpers/global-setup.cluster.ts). */
export const onCluster = (): boolean => inject('redisCluster') !== undefined;

/** Workers block on BZPOPMIN, so BullMQ needs requests that wait instead of failing after retries. */
export const CLUSTER_OPTIONS: ClusterOptions = { redisOptions: { maxRetriesPerRequest: null } };

function clusterClient(): Cluster {
  const nodes = inject('redisCluster');
  if (nodes === undefined) throw new Error('no cluster in this run');
  return track(new Cluster(nodes, CLUSTER_OPTIONS));
}

/** A fresh queue name per test, so tests never see each other's keys or jobs. */
export const uniqueName = (label = 't'): string => `${label}-${randomBytes(5).toString('hex')}`;

type Closable = { close(): Promise<unknown> } | { quit(): Promise<unknown> };
const tracked: Closable[] = [];

export function track<T extends Closable>(resource: T): T {
  tracked.push(resource);
  return resource;
}

/** Closes in reverse order of creation (workers before their batcher); fails if a close hangs. */
export async function closeTracked(timeoutMs = 15_000): Promise<void> {
  const all = tracked.splice(0).reverse();
  for (const resource of all) {
    const closing = 'close' in resource ? resource.close() : resource.quit();
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`close() did not return within ${timeoutMs} ms`)), timeoutMs);
    });
    try {
      await Promise.race([closing, timeout]);
    } finally {
      clearTimeout(timer);
    }
  }
}

/** A client for a test to inspect or tamper with Redis: a Cluster client in the cluster run. */
export function redisClient(): Redis | Cluster {
  return onCluster() ? clusterClient() : track(new Redis(redisUrl(), { maxRetriesPerRequest: null }));
}

/** What test batchers connect with: ioredis options, or (in the cluster run) a Cluster client closed after the test. */
export function testConnection(): RedisOptionsOrCluster {
  return onCluster() ? clusterClient() : { ...parseUrl(redisUrl()), maxRetriesPerRequest: null };
}
type RedisOptionsOrCluster = Exclude<BatchByKeyOptions['connection'], string | Redis>;

/** The prefix of a batcher named `name` that was given none, on this run's Redis. */
export const prefixOf = (name: string): string => defaultPrefix(name, onCluster());

/** The key names of a test batcher that was given no prefix. */
export const keyspaceOf = (b: Batcher): Keyspace => new Keyspace(prefixOf(b.name), b.name);

/** A BullMQ Queue on the queue of a test batcher that was given no prefix, to look at its jobs. */
export function queueOf(b: Batcher): Queue<KeyJobData> {
  return track(new Queue<KeyJobData>(b.name, { connection: testConnection() as ConnectionOptions, prefix: prefixOf(b.name) }));
}

/** KEYS over every master: on a cluster, one node holds only its own slots. */
export async function keysMatching(pattern: string): Promise<string[]> {
  const client = redisClient();
  if (!(client instanceof Cluster)) return client.keys(pattern);
  await new Promise<void>((resolve, reject) => {
    if (client.status === 'ready') return resolve();
    client.once('ready', resolve);
    client.once('error', reject);
  });
  return (await Promise.all(client.nodes('master').map((node) => node.keys(pattern)))).flat();
}

export type TestOptions<Data = unknown> = Omit<BatchByKeyOptions<Data>, 'name' | 'connection' | 'eachIteration'> & {
  name?: string;
  eachIteration: EachIteration<Data>;
};

/** A batcher on the test Redis with a unique name; closed after the test. */
export function testBatcher<Data = unknown>(options: TestOptions<Data>): Batcher<Data> {
  return track(batchByKey<Data>({ name: uniqueName(), connection: testConnection(), ...options }));
}

export function parseUrl(url: string): { host: string; port: number } {
  const u = new URL(url);
  return { host: u.hostname, port: Number(u.port) };
}

/** Polls until `check` returns a truthy value (which it returns), or throws after `timeoutMs`. */
export async function waitFor<T>(
  check: () => T | Promise<T>,
  { timeoutMs = 20_000, intervalMs = 20, what = 'condition' } = {},
): Promise<NonNullable<T>> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await check();
    if (value) return value;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, intervalMs));
  }
}

export const range = (n: number, prefix = ''): string[] => Array.from({ length: n }, (_, i) => `${prefix}${i}`);

/** Records what a handler saw, in order, with the key and the time. */
export class Recorder {
  readonly calls: { key: string; ids: string[]; at: number }[] = [];
  readonly handler: EachIteration = (ids, ctx) => {
    this.calls.push({ key: ctx.key, ids: [...ids], at: Date.now() });
  };
  idsOf(key: string): string[] {
    return this.calls.filter((c) => c.key === key).flatMap((c) => c.ids);
  }
  get all(): string[] {
    return this.calls.flatMap((c) => c.ids);
  }
}

/**
 * A standalone redis-server of the calling test file's own (started before its tests, stopped
 * after), for tests that read server-wide counters (INFO commandstats, SLOWLOG), which other
 * files' commands would mix into. Not on a Cluster run: such tests are standalone only.
 */
export function isolatedRedis(): () => LocalRedis {
  let server: LocalRedis | undefined;
  beforeAll(async () => {
    if (!onCluster()) server = await startRedis();
  });
  afterAll(async () => {
    await server?.stop();
  });
  return () => {
    if (!server) throw new Error('isolatedRedis: no server (a Cluster run, or called outside a test)');
    return server;
  };
}
