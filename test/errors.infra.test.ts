import { describe, expect, it } from 'vitest';
import type { Keyspace } from '../src/storage/keys';
import { JOB_NAME } from '../src';
import { keyspaceOf, queueOf, range, Recorder, redisClient, testBatcher, waitFor } from './helpers/redis';

describe('Redis errors outside the handler', () => {
  it('never fail the key job: the run is retried and nothing is lost', async () => {
    const rec = new Recorder();
    const redis = redisClient();
    const warnings: string[] = [];
    let names!: ReturnType<Keyspace['forKey']>;
    let sabotaged = false;
    const b = testBatcher({
      sliceSize: 5,
      // A run that meets the bogus lock before the test removes it waits one TTL.
      lockTtlMs: 1000,
      backoff: { type: 'fixed', delayMs: 10 },
      logger: { warn: (m) => void warnings.push(m) },
      async eachIteration(ids, ctx) {
        rec.handler(ids, ctx);
        if (!sabotaged) {
          sabotaged = true;
          // The lock key turns into a list: every fenced script now fails with WRONGTYPE.
          await redis.del(names.lock);
          await redis.rpush(names.lock, 'not-a-lock');
        }
      },
    });
    names = keyspaceOf(b).forKey('k');
    const queue = queueOf(b);
    b.createWorker();
    await b.performBatchLater(range(10), { key: 'k' });
    await waitFor(() => warnings.includes('batch-by-key: run interrupted by an error; retrying the key'));
    // One atomic read: the job is somewhere between active, delayed and waiting, never failed.
    const counts = await queue.getJobCounts('active', 'waiting', 'delayed', 'prioritized', 'failed');
    expect(counts.failed).toBe(0);
    expect(counts.active! + counts.waiting! + counts.delayed! + counts.prioritized!).toBe(1);

    await redis.del(names.lock);
    await waitFor(() => rec.all.length >= 15);
    // The slice that was running when Redis broke is processed again (at least once); the rest once.
    expect(rec.all).toEqual([...range(5), ...range(10)]);
  });

  it('a push that fails in Redis rejects and stores nothing of it (a push is one script call)', async () => {
    const redis = redisClient();
    const b = testBatcher({ eachIteration: () => {} });
    const names = keyspaceOf(b).forKey('k');
    await redis.set(names.pending, 'a string, so RPUSH fails');
    await expect(b.performBatchLater(['1'], { key: 'k', track: true })).rejects.toThrow(/WRONGTYPE/);
    expect(await redis.exists(names.pushMarks, names.tracked)).toBe(0);
    expect(await queueOf(b).getWaitingCount()).toBe(0);
  });

  it('after SCRIPT FLUSH a push still succeeds whole: one script call, which ioredis resends as EVAL on NOSCRIPT', async () => {
    const rec = new Recorder();
    const redis = redisClient();
    const b = testBatcher({ eachIteration: rec.handler });
    await b.performBatchLater(['0'], { key: 'k' });
    // Every node of a Cluster: the scripts are gone wherever the key lives.
    const nodes = 'nodes' in redis ? redis.nodes('master') : [redis];
    await Promise.all(nodes.map((node) => node.script('FLUSH')));
    await b.performBatchLater(['1', '2'], { key: 'k', track: true });
    expect(await b.backlog('k')).toEqual({ pending: 3, inFlight: 0, retrying: 0 });
    b.createWorker();
    await waitFor(() => rec.all.length === 3, { what: 'the three ids' });
    expect(rec.idsOf('k')).toEqual(['0', '1', '2']);
  });

  it('after FUNCTION FLUSH pushes and runs go on: a call that finds its function gone loads the library again and is sent once more', async () => {
    const rec = new Recorder();
    const redis = redisClient();
    const b = testBatcher({ eachIteration: rec.handler });
    await b.performBatchLater(['0'], { key: 'k' });
    // Every node of a Cluster: the functions are gone wherever the key lives.
    const nodes = 'nodes' in redis ? redis.nodes('master') : [redis];
    await Promise.all(nodes.map((node) => node.call('FUNCTION', 'FLUSH')));
    await b.performBatchLater(['1', '2'], { key: 'k', track: true });
    expect(await b.backlog('k')).toEqual({ pending: 3, inFlight: 0, retrying: 0 });
    const worker = b.createWorker();
    await waitFor(() => rec.all.length === 3, { what: 'the three ids' });
    // Gone again between a push and the worker's next call: its fetch or first claim loads it.
    // (pause(true): on a Cluster BullMQ's waiting pause can wait for ever, BullMQ issue #4065.)
    await worker.pause(true);
    await b.performBatchLater(['3'], { key: 'k' });
    await Promise.all(nodes.map((node) => node.call('FUNCTION', 'FLUSH')));
    await worker.resume();
    await waitFor(() => rec.all.length === 4, { what: 'the id pushed before the second flush' });
    expect(rec.idsOf('k')).toEqual(['0', '1', '2', '3']);
  });

  it('a first claim that fails after taking the lock gives the lock back, so the key does not wait out its TTL', async () => {
    const rec = new Recorder();
    const redis = redisClient();
    const b = testBatcher({
      lockTtlMs: 600_000,
      // Long enough that the failed run's job is still delayed when the lock is looked at.
      backoff: { type: 'fixed', delayMs: 60_000 },
      eachIteration: rec.handler,
    });
    const names = keyspaceOf(b).forKey('k');
    // Pending of the wrong type: the first claim takes the lock, then fails on it (no rollback in Redis).
    await redis.set(names.pending, 'not a list');
    await queueOf(b).add(JOB_NAME, { key: 'k' }, { deduplication: { id: 'k' } });
    b.createWorker();
    // The run hands the key on to a delayed job only after giving the lock back.
    const delayedKeyJobs = async () => (await queueOf(b).getJobs(['delayed'])).filter((j) => j?.name === JOB_NAME && j.data.key === 'k');
    await waitFor(async () => (await delayedKeyJobs()).length === 1, { what: 'the failed run to hand the key on' });
    expect(await redis.exists(names.lock)).toBe(0);
    expect(await redis.get(names.pending)).toBe('not a list');
    // Fixed, a push brings the job forward and it runs at once, not after the 10-minute lock TTL.
    await redis.del(names.pending);
    await b.performBatchLater(['1'], { key: 'k' });
    await waitFor(() => rec.all.length === 1, { what: 'the id' });
    expect(rec.calls.map((c) => [c.key, c.ids])).toEqual([['k', ['1']]]);
    expect(await queueOf(b).getFailedCount()).toBe(0);
  });
});
