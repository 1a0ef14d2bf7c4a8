import type { TestProject } from 'vitest/node';
import { startRedis } from '../../tools/redis-server';

declare module 'vitest' {
  export interface ProvidedContext {
    /** Set by this setup; absent in the cluster run. */
    redisUrl?: string;
    /** Startup nodes, set by global-setup.cluster.ts; absent in the standalone run. */
    redisCluster?: { host: string; port: number }[];
  }
}

/** One redis-server for the whole run (or REDIS_URL); every test uses its own queue name. */
export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  if (process.env.REDIS_URL) {
    project.provide('redisUrl', process.env.REDIS_URL);
    return async () => {};
  }
  const redis = await startRedis();
  project.provide('redisUrl', redis.url);
  return () => redis.stop();
}
