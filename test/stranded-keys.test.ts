import { describe, expect, it } from 'vitest';
import { Gate } from './helpers/gate';
import { keyspaceOf, keysMatching, onCluster, queueOf, range, Recorder, redisClient, testBatcher, waitFor } from './helpers/redis';
import { BULLMQ_JOB_FIELDS } from '../src/bullmq';
import { JOB_NAME, JOB_POINTER, jobPointerOf } from '../src/storage/keys';
import type { Batcher } from '../src';

/**
 * What BullMQ's own operations (and an operator's or an eviction's) can do to a key's job, and
 * the rule they must not break: a key with ids always gets a job a worker finds, within one
 * recoveryIntervalMs (a walk over the whole of Redis for keys listed nowhere: one interval per
 * 10,000 names; see docs/failures-and-flow.md).
 */
describe("keys stranded by what is done to BullMQ's lists", () => {
  const pointerOf = (b: Batcher, key: string): string => jobPointerOf(queueOf(b).toKey(''), key);
  const jobIdOf = async (b: Batcher, key: string): Promise<string> =>
    waitFor(() => redisClient().get(pointerOf(b, key)), { what: `${key}'s job pointer` });

  /** Key 'lost' with 3 ids, whose job's hash survives while its id is in none of BullMQ's lists. */
  const keyWhoseJobLostItsPlace = async () => {
    const rec = new Recorder();
    const b = testBatcher({ eachIteration: rec.handler, recoveryIntervalMs: 400 });
    const queue = queueOf(b);
    await b.performBatchLater(range(3), { key: 'lost' });
    const jobId = await jobIdOf(b, 'lost');
    // As after an eviction or an operator's DEL of BullMQ's wait list: the job's hash survives.
    await redisClient().lrem(queue.keys.wait!, 0, jobId);
    await redisClient().zrem(queue.keys.prioritized!, jobId);
    expect(await queue.getJobState(jobId)).toBe('unknown');
    return { rec, b, queue };
  };

  it('a job whose hash outlived its place in the wait list covers nothing: the sweep adds a job, and recover() does too', async () => {
    const { rec, b, queue } = await keyWhoseJobLostItsPlace();
    // A standalone push trusts the job's hash and lists the key; a Cluster push adds the job
    // after its call, and that add finds no job where BullMQ fetches.
    await b.performBatchLater(range(3, 'more-'), { key: 'lost' });
    expect(await b.recover()).toBe(onCluster() ? 0 : 1);
    const jobs = await queue.getJobs(['waiting', 'prioritized', 'delayed']);
    expect(jobs.filter((job) => job.data.key === 'lost')).toHaveLength(1);
    b.createWorker();
    await waitFor(() => rec.all.length === 6, { what: 'the stranded key to run', timeoutMs: 10_000 });
    expect(rec.idsOf('lost')).toEqual([...range(3), ...range(3, 'more-')]);
  });

  it("a job that lost its place is found by the workers' sweep alone", async () => {
    const { rec, b } = await keyWhoseJobLostItsPlace();
    await b.performBatchLater(range(2, 'more-'), { key: 'lost' });
    b.createWorker();
    await waitFor(() => rec.all.length === 5, { what: 'the sweep to serve the key', timeoutMs: 10_000 });
    expect(rec.idsOf('lost')).toEqual([...range(3), ...range(2, 'more-')]);
  });

  it("after queue.obliterate(), a pointer that names another key's new job (ids start again) is no job of its key's", async () => {
    const rec = new Recorder();
    const b = testBatcher({ eachIteration: rec.handler, store: 'zset', recoveryIntervalMs: 60_000 });
    const queue = queueOf(b);
    await b.performBatchLater(['a0'], { key: 'a' });
    const first = await jobIdOf(b, 'a');
    await queue.obliterate({ force: true });
    // Job ids start again: b's job, delayed for its id's time, takes a's old id.
    await b.performBatchLater(['b0'], { key: 'b', delayMs: 60_000 });
    expect(await jobIdOf(b, 'b')).toBe(first);
    await b.performBatchLater(['a1'], { key: 'a' });
    const jobs = await queue.getJobs(['waiting', 'prioritized', 'delayed']);
    expect(jobs.map((job) => job.data.key).sort()).toEqual(['a', 'b']);
    expect(await queue.getJobState(first)).toBe('delayed');
    b.createWorker();
    await waitFor(() => rec.idsOf('a').length === 2, { what: 'a to run', timeoutMs: 10_000 });
    expect(rec.idsOf('a')).toEqual(['a0', 'a1']);
    expect(rec.idsOf('b')).toEqual([]);
  });

  it("a key job BullMQ fails at its fetch (stalled past maxStalledCount) leaves the key's lock free, and the key runs", async () => {
    const rec = new Recorder();
    // With the lock kept, the key would wait out lockTtlMs (30 s): far past the test's deadline.
    const b = testBatcher({ eachIteration: rec.handler, recoveryIntervalMs: 400, lockTtlMs: 30_000 });
    const redis = redisClient();
    const failed: string[] = [];
    await b.performBatchLater(range(3), { key: 'stalled' });
    const jobId = await jobIdOf(b, 'stalled');
    // What BullMQ's stalled check (moveStalledJobsToWait) writes on a job it gives up on: the
    // worker that fetches it next fails it without calling the processor.
    await redis.hset(queueOf(b).toKey(jobId), BULLMQ_JOB_FIELDS.deferredFailure, 'job stalled more than allowable limit');
    const worker = b.createWorker();
    worker.on('failed', (job) => void failed.push(String(job?.id)));
    await waitFor(() => failed.includes(jobId), { what: 'BullMQ to fail the stalled job' });
    expect(await redis.exists(keyspaceOf(b).forKey('stalled').lock)).toBe(0);
    await waitFor(() => rec.all.length === 3, { what: 'the key to run', timeoutMs: 10_000 });
    expect(rec.idsOf('stalled')).toEqual(range(3));
  });

  it('a job named like ours whose key is a number claims nothing for the key of that name', async () => {
    const rec = new Recorder();
    const b = testBatcher({ eachIteration: rec.handler, lockTtlMs: 30_000 });
    const queue = queueOf(b);
    const failed: string[] = [];
    // Fetched first: before the fix its fetch took key "5"'s lock, for lockTtlMs.
    const numeric = await queue.add(JOB_NAME, { key: 5 as unknown as string });
    await b.performBatchLater(range(2), { key: '5' });
    const worker = b.createWorker();
    worker.on('failed', (job) => void failed.push(String(job?.id)));
    await waitFor(() => rec.all.length === 2, { what: 'key "5" to run', timeoutMs: 10_000 });
    expect(rec.idsOf('5')).toEqual(range(2));
    await waitFor(() => failed.includes(numeric.id!), { what: 'the numeric job to fail' });
  });

  it('keys whose jobs were removed through BullMQ (remove, drain, obliterate) run without an operator', async () => {
    const rec = new Recorder();
    const b = testBatcher({ eachIteration: rec.handler, recoveryIntervalMs: 500 });
    const queue = queueOf(b);
    await b.performBatchLater(range(2), { key: 'removed' });
    await queue.remove(await jobIdOf(b, 'removed'));
    await b.performBatchLater(range(2), { key: 'drained' });
    await jobIdOf(b, 'drained');
    await queue.drain(true);
    await b.performBatchLater(range(2), { key: 'obliterated' });
    await jobIdOf(b, 'obliterated');
    await queue.obliterate({ force: true });
    expect(await queue.getJobCounts('waiting', 'prioritized', 'delayed')).toEqual({ waiting: 0, prioritized: 0, delayed: 0 });
    b.createWorker();
    await waitFor(() => rec.all.length === 6, { what: 'the three keys to run', timeoutMs: 15_000 });
    for (const key of ['removed', 'drained', 'obliterated']) expect(rec.idsOf(key)).toEqual(range(2));
  });

  it('a listed key whose job was removed gets a job within one recoveryIntervalMs of its listing', async () => {
    const intervalMs = 2_000;
    const gate = new Gate();
    const rec = new Recorder();
    const b = testBatcher({
      recoveryIntervalMs: intervalMs,
      eachIteration: async (ids, ctx) => {
        if (ctx.key === 'blocker') await gate.opened;
        rec.handler(ids, ctx);
      },
    });
    const redis = redisClient();
    const queue = queueOf(b);
    // The one slot holds the blocker's run: the stranded keys' new jobs wait where they can be seen.
    b.createWorker({ concurrency: 1 });
    await b.performBatchLater(['x'], { key: 'blocker' });
    await waitFor(async () => (await queue.getJobCounts('active')).active === 1, { what: 'the blocker to run' });
    const keys = range(4, 'k');
    const delays = await Promise.all(
      keys.map(async (key, i) => {
        await new Promise((resolve) => setTimeout(resolve, (i * intervalMs) / keys.length));
        await b.performBatchLater(['0'], { key });
        const removed = await jobIdOf(b, key);
        // A push to a key whose job waits lists the key for the sweep.
        const listedAt = Date.now();
        await b.performBatchLater(['1'], { key });
        await queue.remove(removed);
        const added = await waitFor(
          async () => {
            const id = await redis.get(pointerOf(b, key));
            return id !== null && id !== removed && (await queue.getJobState(id)) !== 'unknown' ? Date.now() : undefined;
          },
          { what: `${key}'s new job`, timeoutMs: 3 * intervalMs },
        );
        return added - listedAt;
      }),
    );
    for (const delay of delays) expect(delay).toBeLessThan(intervalMs);
    gate.open();
    await waitFor(() => rec.all.length === 1 + 2 * keys.length, { what: 'every key to run' });
    for (const key of keys) expect(rec.idsOf(key)).toEqual(['0', '1']);
  });

  it('job pointers do not outlive their jobs where BullMQ completes them (fastPath off)', async () => {
    const rec = new Recorder();
    const b = testBatcher({ eachIteration: rec.handler, fastPath: 'off', recoveryIntervalMs: 300 });
    const keys = range(20, 'p');
    for (const key of keys) await b.performBatchLater(['1', '2'], { key });
    b.createWorker();
    await waitFor(() => rec.all.length === 40, { what: 'every key to run' });
    const pattern = `${queueOf(b).toKey('')}${JOB_POINTER}*`.replace(/[[\]]/g, (c) => `\\${c}`);
    await waitFor(async () => (await keysMatching(pattern)).length === 0, { what: 'the sweep to delete the pointers', timeoutMs: 10_000 });
  });
});
