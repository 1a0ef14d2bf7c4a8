import type { TestProject } from 'vitest/node';
import { startCluster } from '../../tools/redis-cluster';

/** One Redis Cluster (3 masters, 3 replicas) for the whole cluster run; every test uses its own queue name. */
export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  const cluster = await startCluster();
  project.provide('redisCluster', cluster.nodes);
  return () => cluster.stop();
}
