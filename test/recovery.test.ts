import { describe, expect, it } from 'vitest';
import { InvalidOptionError } from '../src';
import { Gate } from './helpers/gate';
import { keyspaceOf, onCluster, queueOf, range, Recorder, redisClient, testBatcher, waitFor } from './helpers/redis';
import { jobPointerOf } from '../src/storage/keys';

const standaloneOnly = it.skipIf(onCluster());

describe('recovery of keys that have ids but no job', () => {
  it('a worker finds ids left by a pusher that died before adding the job, and processes them', async () => {
    const rec = new Recorder();
    const b = testBatcher({ eachIteration: rec.handler, recoveryIntervalMs: 100 });
    const redis = redisClient();
    const keyspace = keyspaceOf(b);
    // What a pusher leaves if it dies between its pipeline and the job add.
    await redis.zadd(keyspace.index, Date.now() - 1000, 'orphan');
    await redis.rpush(keyspace.forKey('orphan').pending, ...range(5));
    b.createWorker();
    await waitFor(() => rec.all.length === 5, { what: 'the sweep to re-enqueue the key' });
    expect(rec.idsOf('orphan')).toEqual(range(5));
  });

  it('a key lock set by hand with no TTL gets one from the sweep, with a warning, and the key runs once it expires', async () => {
    const rec = new Recorder();
    const warnings: string[] = [];
    const b = testBatcher({
      eachIteration: rec.handler,
      recoveryIntervalMs: 100,
      lockTtlMs: 1_000,
      logger: { warn: (message) => void warnings.push(message) },
    });
    const redis = redisClient();
    const names = keyspaceOf(b).forKey('stuck');
    await redis.set(names.lock, 'by-hand');
    // The push counts the lock as a run that will take its ids: it adds no job.
    await b.performBatchLater(range(3), { key: 'stuck' });
    b.createWorker();
    await waitFor(() => rec.all.length === 3, { what: 'the key to run after the repaired lock expired', timeoutMs: 10_000 });
    expect(rec.idsOf('stuck')).toEqual(range(3));
    expect(warnings).toContain('batch-by-key: a key lock had no TTL (set by hand?); it expires in lockTtlMs');
  });

  it('a slice a dead run left in a lane other than 0, with no lanes mark (an earlier version), is found and run', async () => {
    const rec = new Recorder();
    const b = testBatcher({ eachIteration: rec.handler, recoveryIntervalMs: 100 });
    const redis = redisClient();
    const keyspace = keyspaceOf(b);
    const names = keyspace.forKey('laned');
    // A crashed run of 4 lanes left lane 3's slice in flight; it set no mark (keys.ts `lanes`).
    await redis.zadd(keyspace.index, Date.now() - 1000, 'laned');
    await redis.rpush(`${names.inFlight}:3`, ...range(3));
    expect(await redis.exists(names.lanes)).toBe(0);
    b.createWorker();
    await waitFor(() => rec.all.length === 3, { what: 'the sweep to mark the key and its run to recover lane 3' });
    expect([...rec.idsOf('laned')].sort()).toEqual(range(3));
    expect(await b.backlog('laned')).toEqual({ pending: 0, inFlight: 0, retrying: 0 });
    expect(await redis.exists(names.lanes)).toBe(0);
  });

  it('recover() drops drained keys from the index and leaves keys with a running job alone', async () => {
    const b = testBatcher({ eachIteration: () => {} });
    const redis = redisClient();
    const keyspace = keyspaceOf(b);
    await redis.zadd(keyspace.index, 1, 'drained');
    await redis.zadd(keyspace.index, 1, 'running');
    await redis.rpush(keyspace.forKey('running').pending, 'x');
    await redis.set(keyspace.forKey('running').lock, 'someone', 'PX', 10_000);
    expect(await b.recover()).toBe(0);
    expect(await redis.zrange(keyspace.index, 0, -1)).toEqual(['running']);
  });

  it('one sweep empties the index of drained keys however many there are (not 1,000 a sweep)', async () => {
    const b = testBatcher({ eachIteration: () => {} });
    const redis = redisClient();
    const keyspace = keyspaceOf(b);
    const members = range(2500, 'drained-').flatMap((key) => [1, key]);
    await redis.zadd(keyspace.index, ...members);
    await redis.zadd(keyspace.index, 1, 'busy');
    await redis.rpush(keyspaceOf(b).forKey('busy').pending, 'x');
    await b.recover();
    expect(await redis.zrange(keyspace.index, 0, -1)).toEqual(['busy']);
  });

  it('a key whose job is gone but whose job pointer survives gets a job from its next push (not only from the sweep)', async () => {
    const rec = new Recorder();
    // A sweep far away: only the push can bring the key back within the test.
    const b = testBatcher({ eachIteration: rec.handler, recoveryIntervalMs: 600_000 });
    const redis = redisClient();
    const queue = queueOf(b);
    await b.performBatchLater(range(3), { key: 'k' });
    const [job] = await queue.getWaiting();
    // The job vanishes (eviction, a hand DEL) and leaves its pointer behind.
    await redis.lrem(queue.toKey('wait'), 0, job!.id!);
    await redis.del(queue.toKey(job!.id!));
    expect(await redis.get(jobPointerOf(queue.toKey(''), 'k'))).toBe(job!.id);
    await b.performBatchLater(['3'], { key: 'k' });
    b.createWorker();
    await waitFor(() => rec.all.length === 4, { what: 'every id of the key' });
    expect(rec.idsOf('k')).toEqual(range(4));
  });

  // On a Cluster every push lists its key (it writes the index before its call).
  standaloneOnly('a drain of one-id keys leaves the recovery index nearly empty: a push that adds its key’s job lists no key', async () => {
    const rec = new Recorder();
    // No sweep within the test: the index holds what the pushes and runs wrote.
    const b = testBatcher({ eachIteration: rec.handler, recoveryIntervalMs: 600_000 });
    const keys = range(500, 'one-');
    for (let i = 0; i < keys.length; i += 50) await Promise.all(keys.slice(i, i + 50).map((key) => b.performBatchLater(['x'], { key })));
    b.createWorker({ concurrency: 5 });
    await waitFor(() => rec.all.length === keys.length, { what: 'every key drained', timeoutMs: 30_000 });
    expect(await redisClient().zcard(keyspaceOf(b).index)).toBeLessThanOrEqual(5);
  });

  // On a Cluster every push lists its key (it writes the index before its call).
  standaloneOnly('a push that finds its key covered lists the key (its run or job may still fail)', async () => {
    const b = testBatcher({ eachIteration: () => {} });
    await b.performBatchLater(['a'], { key: 'k' });
    expect(await redisClient().zrange(keyspaceOf(b).index, 0, -1)).toEqual([]);
    await b.performBatchLater(['b'], { key: 'k' });
    expect(await redisClient().zrange(keyspaceOf(b).index, 0, -1)).toEqual(['k']);
  });

  it('a key whose job was removed by hand is found by recover({ full: true }), which SCANs the keys, not by recover()', async () => {
    const rec = new Recorder();
    const b = testBatcher({ eachIteration: rec.handler, recoveryIntervalMs: 600_000 });
    const queue = queueOf(b);
    await b.performBatchLater(range(3), { key: 'removed' });
    await b.performBatchLater(['x'], { key: 'kept' });
    const job = (await queue.getWaiting()).find((j) => j.data.key === 'removed')!;
    await queue.remove(job.id!);
    // Nothing lists the key (on a Cluster its push did: that entry is gone as after an incident's sweeps).
    await redisClient().zrem(keyspaceOf(b).index, 'removed');
    expect(await b.recover()).toBe(0);
    expect(await b.recover({ full: true })).toBe(1);
    b.createWorker();
    await waitFor(() => rec.all.length === 4, { what: 'every id, the removed job’s key’s too' });
    expect(rec.idsOf('removed')).toEqual(range(3));
  });

  it('recover() options are checked before anything reaches Redis', async () => {
    const b = testBatcher({ eachIteration: () => {} });
    await expect(b.recover({ full: 'yes' as unknown as boolean })).rejects.toThrow(InvalidOptionError);
    await expect(b.recover({ ful: true } as never)).rejects.toThrow('did you mean full?');
  });

  // On a Cluster every push lists its key (it writes the index before its call).
  standaloneOnly('a run interrupted by an error lists its key for recovery before it requeues the job', async () => {
    let calls = 0;
    const rec = new Recorder();
    const b = testBatcher({
      eachIteration: rec.handler,
      recoveryIntervalMs: 600_000,
      // Read at the run's start: throwing there interrupts the run, which retries the key.
      rateLimit: () => {
        calls++;
        if (calls === 1) throw new Error('rate limit unavailable');
        return undefined;
      },
      logger: { warn: () => {} },
    });
    await b.performBatchLater(['a'], { key: 'k' });
    expect(await redisClient().zcard(keyspaceOf(b).index)).toBe(0);
    b.createWorker();
    await waitFor(() => calls >= 1, { what: 'the run to start' });
    await waitFor(async () => (await redisClient().zrange(keyspaceOf(b).index, 0, -1)).includes('k'), { what: 'the key listed' });
    await waitFor(() => rec.all.length === 1, { what: 'the retried run' });
  });

  // On a Cluster every push lists its key (it writes the index before its call).
  standaloneOnly('a run handed back on shutdown lists its key for recovery', async () => {
    const gate = new Gate();
    const started = new Gate();
    // fifo: a push bigger than a slice still adds its key's job in its own call (no index entry).
    const b = testBatcher({
      sliceSize: 1,
      scheduling: 'fifo',
      recoveryIntervalMs: 600_000,
      eachIteration: async () => {
        started.open();
        await gate.opened;
      },
    });
    await b.performBatchLater(range(3), { key: 'k' });
    expect(await redisClient().zcard(keyspaceOf(b).index)).toBe(0);
    const worker = b.createWorker();
    await started.opened;
    const closed = worker.close();
    gate.open();
    await closed;
    expect(await redisClient().zrange(keyspaceOf(b).index, 0, -1)).toEqual(['k']);
    expect((await b.backlog('k')).pending).toBe(2);
  });
});
