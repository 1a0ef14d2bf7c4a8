/**
 * One batcher over every master of a Redis Cluster (`shards`), and a change of `shards` on a
 * running system: run it with `npx tsx examples/sharded-cluster.ts`. It starts a throwaway
 * 3-master cluster from the `redis-server` and `redis-cli` on your PATH (or uses
 * REDIS_CLUSTER_NODES, `host:port,host:port`), pushes to many accounts with `shards: 3`, prints
 * how the key jobs spread over the masters, then moves to `shards: 6` while the first worker
 * runs, and retires the old count once its queues are empty. See docs/sharding.md.
 */
import { pathToFileURL } from 'node:url';
import { Cluster } from 'ioredis';
import { batchByKey, ShardsInUseError, type Batcher } from 'batch-by-key';
import { startCluster } from '../tools/redis-cluster';

type Nodes = { host: string; port: number }[];

/** A batcher of one shard count: the definition every process of the app would share. */
function refresher(connection: Cluster, shards: number, processed: Set<string>): Batcher {
  return batchByKey({
    name: 'segment-refresher',
    connection,
    shards,
    // A key's job left on its old shard waits out the key's lock (held by its run on the new
    // shard) before it finds the key empty: a short lock TTL keeps this demo's change quick.
    lockTtlMs: 2_000,
    recoveryIntervalMs: 500,
    // A count can be retired once no process has checked it for its recoveryIntervalMs plus this.
    pushTimeoutMs: 2_000,
    eachIteration(ids, ctx) {
      for (const id of ids) processed.add(`${ctx.key}/${id}`);
    },
  });
}

/** Retires a shard count; false while it is still in use. */
const retired = async (batcher: Batcher, count: number): Promise<boolean> =>
  batcher.retireShardCount(count).then(
    () => true,
    (err: unknown) => {
      if (err instanceof ShardsInUseError) return false;
      throw err;
    },
  );

const until = async (check: () => boolean | Promise<boolean>, what: string, timeoutMs = 30_000): Promise<void> => {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
};

/** Returns how many ids were pushed and processed, and the shard counts left at the end. */
export async function main(nodes: Nodes, accounts = 300): Promise<{ pushed: number; processed: number; counts: number[] }> {
  const connection = new Cluster(nodes, { redisOptions: { maxRetriesPerRequest: null } });
  const processed = new Set<string>();
  const three = refresher(connection, 3, processed);
  const six = refresher(connection, 6, processed);
  let pushed = 0;
  try {
    const worker = three.createWorker({ concurrency: 8 });
    console.log(`shards: 3, so the worker serves ${worker.shardWorkers.length} queues:`);
    for (const w of worker.shardWorkers) {
      const slot = Number(await connection.cluster('KEYSLOT', `${w.opts.prefix!}:x`));
      console.log(`  ${w.opts.prefix!} (slot ${slot})`);
    }
    for (let i = 0; i < accounts; i++) {
      await three.performBatchLater([`seg-${i}`], { key: `acct-${i}` });
      pushed++;
    }
    await until(() => processed.size === pushed, 'the first pushes');

    // A deploy with shards: 6: its processes push to the new count's queues, and the running
    // worker (shards: 3) picks them up at its next sweep, so nothing waits for the old worker to go.
    const newWorker = six.createWorker({ concurrency: 8 });
    for (let i = 0; i < accounts; i++) {
      await six.performBatchLater([`seg-${i}-again`], { key: `acct-${i}` });
      pushed++;
    }
    await until(() => processed.size === pushed, 'the pushes after the change');
    await worker.close();
    // The old count retires once its queues hold no job and the recovery sweep has dropped its drained keys.
    await until(async () => (await six.shardCounts()).every((c) => c.own || (c.jobs === 0 && c.keys === 0)), 'the old count to empty');
    // ... and once no process on it may still push without checking again (ShardsInUseError until then).
    await until(async () => retired(six, 3), 'the old count to retire');
    const counts = (await six.shardCounts()).map((c) => c.count);
    await until(() => newWorker.shardWorkers.length === 6, 'the new worker to drop the old queues');
    console.log(`pushed ${pushed} ids to ${accounts} accounts, processed ${processed.size}; shard counts in use now: ${counts.join(', ')}`);
    return { pushed, processed: processed.size, counts };
  } finally {
    await six.close();
    await three.close();
    connection.disconnect();
  }
}

const nodesFromEnv = (spec: string): Nodes =>
  spec.split(',').map((hostPort) => {
    const [host, port] = hostPort.split(':');
    return { host: host!, port: Number(port) };
  });

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  void (async () => {
    const given = process.env.REDIS_CLUSTER_NODES;
    const cluster = given ? undefined : await startCluster({ masters: 3, replicasPerMaster: 0 });
    try {
      await main(given ? nodesFromEnv(given) : cluster!.nodes);
    } finally {
      await cluster?.stop();
    }
  })().catch((err: unknown) => {
    console.error(err);
    process.exit(1);
  });
}
