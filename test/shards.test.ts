import { describe, expect, it } from 'vitest';
import type { ConnectionOptions, Job } from 'bullmq';
import calculateSlot from 'cluster-key-slot';
import { ClosedError, InvalidOptionError, ShardsInUseError, type Batcher, type KeyJobData } from '../src';
import { CLUSTER_SLOTS, ShardLayout } from '../src/storage/shards';
import { Keyspace } from '../src/storage/keys';
import { Redis } from 'ioredis';
import {
  isolatedRedis,
  keyspaceOf,
  onCluster,
  prefixOf,
  range,
  Recorder,
  redisClient,
  testBatcher,
  testConnection,
  track,
  uniqueName,
  waitFor,
} from './helpers/redis';
import { keysOfShard, layoutOf } from './helpers/shards';
import { sleep } from './helpers/time';
import { batchByKey } from '../src';

/** Waits until shard count `count` of `b`'s batcher holds no job and indexes no key (so it can be retired). */
async function countEmptied(b: Batcher, count: number): Promise<void> {
  await waitFor(
    async () => {
      const listed = (await b.shardCounts()).find((c) => c.count === count);
      return listed?.jobs === 0 && listed.keys === 0;
    },
    { what: `shard count ${count} to empty` },
  );
}

/** Retires shard count `count` once it may be: false (and retried by a waitFor) while ShardsInUseError says it is in use. */
async function retired(b: Batcher, count: number): Promise<boolean> {
  return b.retireShardCount(count).then(
    () => true,
    (err: unknown) => {
      if (err instanceof ShardsInUseError) return false;
      throw err;
    },
  );
}

/** The master of `slot` when a cluster splits its slots evenly over `masters`. */
const evenMaster = (slot: number, masters: number) => Math.floor((slot * masters) / CLUSTER_SLOTS);

describe('shard layout', () => {
  it('keeps the given prefix with one shard, and gives each of several shards a hash tag of its own', () => {
    const one = new ShardLayout('bull', 'q', new Keyspace('bull', 'q'), 1);
    expect(one.prefixes).toEqual(['bull']);
    expect(one.indexes).toEqual([new Keyspace('bull', 'q').index]);
    const three = new ShardLayout('{bull}', 'q', new Keyspace('{bull}', 'q'), 3);
    expect(new Set(three.prefixes).size).toBe(3);
    for (const prefix of three.prefixes) expect(prefix).toMatch(/^bull:\{[^}]+\}$/);
    // A shard's index shares its queue's slot.
    for (const [i, prefix] of three.prefixes.entries()) expect(calculateSlot(three.indexes[i]!)).toBe(calculateSlot(prefix));
  });

  it('spreads shards evenly over the masters of an evenly split cluster', () => {
    for (const masters of [2, 3, 4, 6]) {
      // A multiple of the masters puts as many on each; 16 on 3 masters, 6/5/5.
      for (const count of [masters, 2 * masters, ...(16 % masters === 0 || masters === 3 ? [16] : [])]) {
        const layout = new ShardLayout('bull', 'orders', new Keyspace('bull', 'orders'), count);
        const perMaster = new Array<number>(masters).fill(0);
        for (const prefix of layout.prefixes) perMaster[evenMaster(calculateSlot(prefix), masters)]!++;
        const mean = count / masters;
        expect(Math.max(...perMaster) / mean, `${count} shards on ${masters} masters: ${perMaster.join('/')}`).toBeLessThanOrEqual(
          Math.ceil(mean) / mean,
        );
      }
    }
  });

  it('maps a key to a shard by a stable hash, every shard getting a share', () => {
    const layout = new ShardLayout('bull', 'q', new Keyspace('bull', 'q'), 4);
    const again = new ShardLayout('bull', 'q', new Keyspace('bull', 'q'), 4);
    const perShard = [0, 0, 0, 0];
    for (const key of range(2000, 'acct-')) {
      expect(layout.of(key)).toBe(again.of(key));
      perShard[layout.of(key)]!++;
    }
    for (const n of perShard) expect(n).toBeGreaterThan(350);
    expect(layout.of('ключ {with} braces:and:colons')).toBe(again.of('ключ {with} braces:and:colons'));
  });

  it('refuses a shards option that is not an integer from 1 to 64, before touching Redis', () => {
    for (const shards of [0, 65, 1.5, '3', null]) {
      expect(() => batchByKey({ name: uniqueName(), connection: testConnection(), shards: shards as number })).toThrow(InvalidOptionError);
    }
    expect(() => batchByKey({ name: uniqueName(), connection: testConnection(), shards: 0 })).toThrow(
      /options.shards must be an integer between 1 and 64, got number 0/,
    );
  });
});

describe('a batcher with shards', () => {
  it('processes every id pushed once, in order per key, with jobs on every shard, by one worker', async () => {
    const rec = new Recorder();
    const b = testBatcher({ shards: 4, sliceSize: 10, eachIteration: rec.handler });
    const keys = range(40, 'acct-');
    for (const key of keys) await b.performBatchLater(range(25, `${key}:`), { key });
    const worker = b.createWorker({ concurrency: 3 });
    expect(worker.shardWorkers).toHaveLength(4);
    const queuesUsed = new Set<string>();
    worker.on('completed', (job: Job<KeyJobData>) => queuesUsed.add(job.queueQualifiedName));
    await waitFor(() => rec.all.length >= keys.length * 25, { what: 'every id' });
    for (const key of keys) expect(rec.idsOf(key)).toEqual(range(25, `${key}:`));
    expect(rec.all).toHaveLength(keys.length * 25);
    await waitFor(() => queuesUsed.size === 4, { what: 'a completed job on every shard' });
  });

  it('runs at most `concurrency` jobs at once over all shards, and uses every slot', async () => {
    let running = 0;
    let most = 0;
    const b = testBatcher({
      shards: 3,
      async eachIteration() {
        running++;
        most = Math.max(most, running);
        await sleep(20);
        running--;
      },
    });
    const keys = range(30, 'k-');
    for (const key of keys) await b.performBatchLater(['1'], { key });
    b.createWorker({ concurrency: 2 });
    await waitFor(async () => (await b.stats()).keys === 0 && running === 0, { what: 'every key' });
    expect(most).toBe(2);
  });

  it('lets a light key on one shard run while a heavy key on another still has its backlog (one slot)', async () => {
    const done = new Map<string, number>();
    let heavyDoneWhenLightRan = -1;
    const name = uniqueName();
    const layout = layoutOf(name, 2);
    const [heavy] = keysOfShard(layout, 0, 1, 'heavy');
    const [light] = keysOfShard(layout, 1, 1, 'light');
    const b = track(
      batchByKey({
        name,
        connection: testConnection(),
        shards: 2,
        sliceSize: 5,
        maxRuntimeMs: 50,
        async eachIteration(ids, ctx) {
          if (ctx.key === light) heavyDoneWhenLightRan = done.get(heavy!) ?? 0;
          else await sleep(5);
          done.set(ctx.key, (done.get(ctx.key) ?? 0) + ids.length);
        },
      }),
    );
    await b.performBatchLater(range(1000), { key: heavy });
    b.createWorker({ concurrency: 1 });
    await waitFor(() => (done.get(heavy!) ?? 0) > 0, { what: 'the heavy key to start' });
    await b.performBatchLater(['only'], { key: light });
    await waitFor(() => done.get(light!) === 1, { what: 'the light key' });
    expect(heavyDoneWhenLightRan).toBeGreaterThan(0);
    expect(heavyDoneWhenLightRan).toBeLessThan(1000);
  });

  it('adds up stats, and pauses and resumes every shard with pauseAll and resumeAll', async () => {
    const rec = new Recorder();
    const b = testBatcher({ shards: 3, eachIteration: rec.handler });
    const keys = range(12, 'acct-');
    await b.pauseAll();
    for (const [i, key] of keys.entries()) await b.performBatchLater(range(i + 1, `${key}:`), { key });
    const stats = await b.stats();
    expect(stats.keys).toBe(12);
    expect(stats.pending).toBe((12 * 13) / 2);
    // A push that adds its key's job lists the key nowhere; the full sweep lists each key in its shard's index.
    expect(await b.recover({ full: true })).toBe(0);
    const layout = layoutOf(b.name, 3);
    const client = redisClient();
    const perIndex = await Promise.all(layout.indexes.map(async (index) => client.zcard(index)));
    expect(perIndex.reduce((a, n) => a + n)).toBe(12);
    expect(perIndex.filter((n) => n > 0).length).toBeGreaterThan(1);
    const counts = await b.shardCounts();
    expect(counts).toEqual([{ count: 3, own: true, jobs: 12, keys: 12 }]);

    const worker = b.createWorker({ concurrency: 4 });
    await waitFor(() => worker.shardWorkers.every((w) => w.isRunning()), { what: 'the workers to run' });
    // Paused queues hand out no job: after a few fetch rounds, nothing ran.
    await sleep(300);
    expect(rec.all).toHaveLength(0);
    await b.resumeAll();
    await waitFor(() => rec.all.length === (12 * 13) / 2, { what: 'every id after resumeAll' });
  });

  it('starts the other shards with the leader when autorun is off, and closes them with it', async () => {
    const rec = new Recorder();
    const b = testBatcher({ shards: 3, eachIteration: rec.handler });
    const keys = range(9, 'acct-');
    for (const key of keys) await b.performBatchLater(['1', '2'], { key });
    const worker = b.createWorker({ autorun: false });
    expect(worker.shardWorkers.some((w) => w.isRunning())).toBe(false);
    void worker.run();
    await waitFor(() => rec.all.length === 18, { what: 'every id' });
    await worker.close();
    expect(worker.shardWorkers.some((w) => w.isRunning())).toBe(false);
  });

  it('calls back for tracked pushes on every shard', async () => {
    const settled: string[] = [];
    const b = testBatcher({
      shards: 3,
      eachIteration: () => undefined,
      onTicketSettled: (outcome) => {
        settled.push(outcome.ticket);
      },
    });
    const keys = range(6, 'acct-');
    const tickets: string[] = [];
    for (const key of keys) tickets.push((await b.performBatchLater(['a', 'b'], { key, track: true })).ticket);
    b.createWorker({ concurrency: 2 });
    await waitFor(() => settled.length === keys.length, { what: 'every callback' });
    expect(new Set(settled)).toEqual(new Set(tickets));
  });

  it('loses nothing and never runs a key twice at once while the shard count changes under running workers', async () => {
    const name = uniqueName('reshard');
    const active = new Map<string, number>();
    const processed: string[] = [];
    let overlaps = 0;
    const eachIteration = async (ids: string[], ctx: { key: string }) => {
      const n = (active.get(ctx.key) ?? 0) + 1;
      active.set(ctx.key, n);
      if (n > 1) overlaps++;
      await sleep(1);
      processed.push(...ids.map((id) => `${ctx.key}/${id}`));
      active.set(ctx.key, n - 1);
    };
    // A key's job on its old shard and one on its new may both exist: the one that finds the key's
    // lock held waits out the lock's TTL (as it would a crashed run's), so the old count's queue
    // empties within lockTtlMs.
    const options = {
      name,
      connection: testConnection(),
      sliceSize: 5,
      recoveryIntervalMs: 200,
      lockTtlMs: 2_000,
      pushTimeoutMs: 1_000,
      eachIteration,
    };
    const before = track(batchByKey({ ...options, shards: 1 }));
    const after = track(batchByKey({ ...options, shards: 3 }));
    const oldWorker = before.createWorker({ concurrency: 3 });
    const keys = range(12, 'acct-');
    const pushed: string[] = [];
    const pushRound = async (batcher: typeof before, round: number) => {
      for (const key of keys) {
        const ids = range(5, `${round}-`);
        await batcher.performBatchLater(ids, { key });
        pushed.push(...ids.map((id) => `${key}/${id}`));
      }
    };
    for (let round = 0; round < 4; round++) await pushRound(before, round);
    // The new count's processes start: pushes from both, workers of both counts running.
    const newWorker = after.createWorker({ concurrency: 3 });
    await Promise.all([
      (async () => {
        for (let round = 4; round < 12; round += 2) await pushRound(before, round);
      })(),
      (async () => {
        for (let round = 5; round < 12; round += 2) await pushRound(after, round);
      })(),
    ]);
    // The old worker picks up the new count's shards at its next sweep.
    await waitFor(() => oldWorker.shardWorkers.length === 4, { what: 'the old worker to serve the new shards' });
    await waitFor(() => processed.length >= pushed.length, { what: 'every id pushed', timeoutMs: 30_000 });
    expect(overlaps).toBe(0);
    expect([...processed].sort()).toEqual([...pushed].sort());

    // The old count retires once no process uses it and its queues are empty.
    await oldWorker.close();
    const inUse = await after.retireShardCount(3).catch((err: unknown) => err);
    expect(inUse).toBeInstanceOf(ShardsInUseError);
    // Its own count: no wait would make it retirable.
    expect((inUse as ShardsInUseError).retryAfterMs).toBeUndefined();
    // Its queue empties, and the recovery sweep drops its drained keys from its index.
    await countEmptied(after, 1);
    await waitFor(() => retired(after, 1), { what: 'count 1 to retire once no process may push to it unseen' });
    expect((await after.shardCounts()).map((c) => c.count)).toEqual([3]);
    await waitFor(() => newWorker.shardWorkers.length === 3, { what: 'the new worker to stop serving the old shard' });
    await after.performBatchLater(['last'], { key: 'acct-0' });
    await waitFor(() => processed.includes('acct-0/last'), { what: 'a push after the change' });
  });

  it('keeps the config of every shard count recorded in the batcher config hash', async () => {
    const b = testBatcher({ shards: 2, eachIteration: () => undefined });
    await b.performBatchLater(['1'], { key: 'k' });
    // Covered by the job the first push added: this push lists the key in its recovery index.
    await b.performBatchLater(['2'], { key: 'k' });
    const fields = await redisClient().hkeys(keyspaceOf(b).config);
    expect(fields).toContain('shards:2');
    expect(await b.shardCounts()).toEqual([{ count: 2, own: true, jobs: 1, keys: 1 }]);
    // Another process's count with a job and a key left cannot be retired.
    const other = track(batchByKey({ name: b.name, connection: testConnection(), shards: 1 }));
    await expect(other.retireShardCount(2)).rejects.toThrow(/shard count 2 still has 1 key jobs on its queues and 1 keys/);
  });
});

describe('retireShardCount', () => {
  it('refuses a count that is not an integer from 1 to 64, a missing one included, before touching Redis', async () => {
    const producer = () => track(batchByKey({ name: uniqueName(), connection: testConnection(), shards: 2 }));
    const b = producer();
    await b.performBatchLater(['1'], { key: 'k' });
    const retire = async (count: unknown) => b.retireShardCount(count as number);
    for (const count of [undefined, null, 0, 65, 1.5, Number.NaN, '2']) {
      await expect(retire(count)).rejects.toThrow(InvalidOptionError);
    }
    await expect(retire(undefined)).rejects.toThrow(/retireShardCount count must be an integer between 1 and 64, got undefined/);
    expect((await b.shardCounts()).map((c) => c.count)).toEqual([2]);
    // A closed batcher refuses any Redis call with ClosedError: the count is refused first.
    const closed = producer();
    await closed.close();
    await expect(closed.retireShardCount(undefined as unknown as number)).rejects.toThrow(InvalidOptionError);
    await expect(closed.retireShardCount(2)).rejects.toThrow(ClosedError);
  });
});

describe('retireShardCount of a count nobody used', () => {
  const server = isolatedRedis();
  it.skipIf(onCluster())('closes the queues it opened to check the count: no connection is held until close', async () => {
    const admin = new Redis(server().url);
    const clients = async () => Number(/connected_clients:(\d+)/.exec(await admin.info('clients'))![1]);
    const b = track(batchByKey({ name: uniqueName('retire-unused'), connection: server().url, shards: 2 }));
    await b.performBatchLater(['1'], { key: 'k' });
    await waitFor(async () => (await b.shardCounts()).length === 1, { what: 'the batcher to be connected' });
    const before = await clients();
    await b.retireShardCount(64);
    expect(await clients()).toBe(before);
    admin.disconnect();
  });
});

describe('attach with shards', () => {
  it("refuses a worker of the caller's on a prefix that is no shard's, naming the shards' prefixes", async () => {
    const { Worker } = await import('bullmq');
    const b = testBatcher({ shards: 2, eachIteration: () => undefined });
    const layout = layoutOf(b.name, 2);
    const stray = track(
      new Worker(b.name, b.processor(), { connection: testConnection() as ConnectionOptions, prefix: prefixOf(b.name), autorun: false }),
    );
    expect(() => b.attach(stray)).toThrow(InvalidOptionError);
    expect(() => b.attach(stray)).toThrow(layout.prefixes[1]!);
    const rec = new Recorder();
    const own = testBatcher({ shards: 2, eachIteration: rec.handler });
    const ownLayout = layoutOf(own.name, 2);
    const workers = ownLayout.prefixes.map((prefix) =>
      track(new Worker(own.name, own.processor(), { connection: testConnection() as ConnectionOptions, prefix })),
    );
    for (const w of workers) own.attach(w);
    for (const key of range(6, 'acct-')) await own.performBatchLater(['1'], { key });
    await waitFor(() => rec.all.length === 6, { what: "every id, by the caller's workers" });
  });
});

describe('a process still running with a retired shard count', () => {
  it('keeps the count from retiring while it may push unseen, and records it again when it pushes later: nothing is stranded', async () => {
    const name = uniqueName('straggler');
    const processed: string[] = [];
    const eachIteration = (ids: string[], ctx: { key: string }) => {
      processed.push(...ids.map((id) => `${ctx.key}/${id}`));
    };
    const options = { name, connection: testConnection(), eachIteration };
    // Its recheck window plus push timeout: 1.5 s in which it pushes without checking again.
    const straggler = track(batchByKey({ ...options, shards: 2, recoveryIntervalMs: 500, pushTimeoutMs: 1_000 }));
    const current = track(batchByKey({ ...options, shards: 3, recoveryIntervalMs: 200 }));
    await straggler.performBatchLater(['a'], { key: 'x' });
    const worker = current.createWorker({ concurrency: 2 });
    await waitFor(() => processed.includes('x/a'), { what: 'x/a' });
    await countEmptied(current, 2);
    // Within the straggler's window: its next push would not check, so the count stays.
    const inUse = await current.retireShardCount(2).catch((err: unknown) => err);
    expect(inUse).toBeInstanceOf(ShardsInUseError);
    // The wait a script retiring counts reads, as the message says it.
    const { retryAfterMs, message } = inUse as ShardsInUseError;
    expect(retryAfterMs).toBeGreaterThan(0);
    expect(retryAfterMs).toBeLessThanOrEqual(1_500);
    expect(message).toContain(`may still push to it without checking again for ${retryAfterMs} ms`);
    await straggler.performBatchLater(['b'], { key: 'y' });
    await waitFor(() => processed.includes('y/b'), { what: "the straggler's push within its window" });

    await countEmptied(current, 2);
    await waitFor(() => retired(current, 2), { what: 'count 2 to retire once its window ended' });
    await waitFor(() => worker.shardWorkers.length === 3, { what: 'the worker to stop serving count 2' });
    // Its window is over: this push checks first, and that check records count 2 again.
    await straggler.performBatchLater(['c'], { key: 'z' });
    expect((await current.shardCounts()).map((c) => c.count)).toEqual([2, 3]);
    await waitFor(() => processed.includes('z/c'), { what: "the straggler's push after the retire" });
  });
});

describe('pauseAll during a change of shards', () => {
  it('holds a shard count that appears after it, until resumeAll', async () => {
    const name = uniqueName('pause-all');
    const rec = new Recorder();
    const options = { name, connection: testConnection(), recoveryIntervalMs: 200, eachIteration: rec.handler };
    const old = track(batchByKey({ ...options, shards: 1 }));
    await old.pauseAll();
    // A process with a new count starts during the pause: it pushes and runs a worker.
    const fresh = track(batchByKey({ ...options, shards: 3 }));
    const keys = range(6, 'acct-');
    for (const key of keys) await fresh.performBatchLater(['1'], { key });
    const { Queue } = await import('bullmq');
    const queues = layoutOf(name, 3).prefixes.map((prefix) =>
      track(new Queue(name, { connection: testConnection() as ConnectionOptions, prefix })),
    );
    // Its first push found the pause and paused its own queues before adding a job there.
    expect(await Promise.all(queues.map(async (q) => q.isPaused()))).toEqual([true, true, true]);
    fresh.createWorker({ concurrency: 2 });
    await old.resumeAll();
    await waitFor(() => rec.all.length === keys.length, { what: 'every id after resumeAll' });
    expect(await Promise.all(queues.map(async (q) => q.isPaused()))).toEqual([false, false, false]);
  });
});

describe('preemption during a change of shards', () => {
  it("yields a heavy run's slot to a light key pushed on another count's queue, within a few slices", async () => {
    const name = uniqueName('preempt-counts');
    const done = new Map<string, number>();
    let heavyDoneWhenLightRan = -1;
    const eachIteration = async (ids: string[], ctx: { key: string }) => {
      if (ctx.key === 'light') heavyDoneWhenLightRan = done.get('heavy') ?? 0;
      else await sleep(5);
      done.set(ctx.key, (done.get(ctx.key) ?? 0) + ids.length);
    };
    // A budget far longer than the test: without preemption the light key would wait it out.
    const options = { name, connection: testConnection(), sliceSize: 5, maxRuntimeMs: 120_000, recoveryIntervalMs: 200, eachIteration };
    const runner = track(batchByKey({ ...options, shards: 1 }));
    const other = track(batchByKey({ ...options, shards: 2 }));
    await runner.performBatchLater(range(20_000), { key: 'heavy' });
    const worker = runner.createWorker({ concurrency: 1 });
    await waitFor(() => (done.get('heavy') ?? 0) > 0, { what: 'the heavy key to start' });
    await other.performBatchLater(['only'], { key: 'light' });
    await waitFor(() => worker.shardWorkers.length === 3, { what: 'the worker to serve count 2' });
    await waitFor(() => done.get('light') === 1, { what: 'the light key', timeoutMs: 15_000 });
    expect(heavyDoneWhenLightRan).toBeGreaterThan(0);
    expect(heavyDoneWhenLightRan).toBeLessThan(20_000);
  });
});
