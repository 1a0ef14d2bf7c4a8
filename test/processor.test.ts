import { Queue, Worker, type ConnectionOptions } from 'bullmq';
import { describe, expect, it } from 'vitest';
import { JOB_NAME } from '../src';
import { encodeKey, jobPointerOf } from '../src/storage/keys';
import { keyspaceOf, prefixOf, Recorder, redisClient, testBatcher, testConnection, track, waitFor } from './helpers/redis';

/** BullMQ options for a hand-built Worker or Queue on a test batcher's queue. */
const bullOptions = (name: string) => ({ connection: testConnection() as ConnectionOptions, prefix: prefixOf(name) });

describe('processor(): a BullMQ Worker you build yourself', () => {
  it('runs our key jobs, hands other job names to the fallback processor, and attach() wires shutdown', async () => {
    const rec = new Recorder();
    const b = testBatcher({ eachIteration: rec.handler });
    const others: string[] = [];
    const worker = track(
      new Worker(
        b.name,
        b.processor((job) => {
          others.push(`${job.name}:${JSON.stringify(job.data)}`);
          return Promise.resolve();
        }),
        bullOptions(b.name),
      ),
    );
    b.attach(worker);
    const queue = track(new Queue(b.name, bullOptions(b.name)));
    await queue.add('send-email', { to: 'a@example.com' });
    await b.performBatchLater(['1', '2'], { key: 'k' });
    await waitFor(() => rec.all.length === 2 && others.length === 1);
    expect(others).toEqual(['send-email:{"to":"a@example.com"}']);
    expect(rec.idsOf('k')).toEqual(['1', '2']);
  });

  it('without a fallback, a foreign job fails with a message naming it', async () => {
    const b = testBatcher({ eachIteration: () => {} });
    const worker = track(new Worker(b.name, b.processor(), bullOptions(b.name)));
    b.attach(worker);
    const failed = new Promise<Error>((resolve) => worker.on('failed', (_job, err) => resolve(err)));
    await track(new Queue(b.name, bullOptions(b.name))).add('stranger', {});
    expect((await failed).message).toBe('batch-by-key: no processor for job name "stranger"');
  });
});

describe("jobs on a batcher's queue that are not its key jobs", () => {
  /** A batcher with a createWorker whose logger records every line, and a Queue of its own on the batcher's queue. */
  function withLines() {
    const lines: { level: string; message: string; meta?: Record<string, unknown> }[] = [];
    const line = (level: string) => (message: string, meta?: Record<string, unknown>) => void lines.push({ level, message, meta });
    const keys: unknown[] = [];
    const b = testBatcher({
      logger: { debug: () => {}, info: () => {}, warn: line('warn'), error: line('error') },
      eachIteration: (_ids, ctx) => void keys.push(ctx.key),
    });
    const worker = b.createWorker();
    return { b, worker, lines, keys, queue: track(new Queue(b.name, bullOptions(b.name))) };
  }

  it('one named like ours with null data, or a key that is no string, fails at once saying so: no TypeError, no numeric ctx.key', async () => {
    const { worker, keys, queue } = withLines();
    const failed = new Map<string | undefined, Error>();
    worker.on('failed', (job, err) => void failed.set(job?.id, err));
    const nullData = await queue.add(JOB_NAME, null, { attempts: 3 });
    const numeric = await queue.add(JOB_NAME, { key: 5 }, { attempts: 3 });
    // Before the fix: a TypeError, three times, and a run of key 5 (a number) that completed.
    await waitFor(() => failed.size === 2, { what: 'both jobs to fail' });
    expect(keys).toEqual([]);
    expect([...failed.keys()].sort()).toEqual([nullData.id, numeric.id].sort());
    for (const err of failed.values()) {
      expect(err.message).toMatch(/^batch-by-key: job \S+ is named "batch-by-key" but its data has no string key \(got .+\)/);
    }
    // Not retried: no attempt of theirs can do better.
    for (const job of [nullData, numeric])
      expect(await queue.getJob(job.id!)).toMatchObject({ attemptsMade: 1, failedReason: expect.any(String) });
  });

  it('an orphaned job id (its hash gone, its id still in wait) is logged at warn as such, not as a job name undefined', async () => {
    const { b, lines } = withLines();
    // An id in wait with no hash: an eviction or an operator's DEL of the job's hash.
    await redisClient().lpush(`${prefixOf(b.name)}:${b.name}:wait`, 'orphan-1');
    // A push wakes the worker (its job's add sets the queue's marker); the orphan is fetched first.
    await b.performBatchLater(['1'], { key: 'k' });
    const about = (l: { message: string; meta?: Record<string, unknown> }) =>
      `${l.message} ${String(l.meta?.err)} ${String(l.meta?.jobId)}`.includes('orphan-1');
    await waitFor(() => lines.length > 0, { what: 'a line logged' });
    // Before the fix: at error, "no processor for job name undefined".
    expect(lines.filter((l) => l.level === 'error')).toEqual([]);
    expect(lines.find(about)).toMatchObject({ level: 'warn', message: expect.stringMatching(/no name and no data/) });
  });
});

describe('what a handler returns', () => {
  it('a promise of another realm (an async function from a vm context) is awaited: its rejection fails the slice', async () => {
    const { runInNewContext } = await import('node:vm');
    const wait = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
    // `instanceof Promise` is false for this realm's promises.
    const foreign = runInNewContext('(async (wait, call) => { await wait(20); if (call === 1) throw new Error("first call fails"); })') as (
      wait: (ms: number) => Promise<unknown>,
      call: number,
    ) => PromiseLike<void>;
    let calls = 0;
    const failed: unknown[] = [];
    const done: number[] = [];
    const b = testBatcher({ backoff: { type: 'fixed', delayMs: 10 }, eachIteration: () => foreign(wait, ++calls) });
    b.on('slice:failed', ({ error }) => void failed.push(error));
    b.on('slice:done', () => void done.push(calls));
    await b.performBatchLater(['1'], { key: 'k' });
    b.createWorker();
    await waitFor(() => done.length === 1, { what: 'the retried slice to succeed' });
    expect(calls).toBe(2);
    expect(failed).toHaveLength(1);
    expect((failed[0] as Error).message).toBe('first call fails');
  });

  it('a lazy thenable (a query builder that runs only when awaited) runs, and the slice ends when it settles', async () => {
    let finished = false;
    const events: string[] = [];
    const b = testBatcher({
      // As a query builder's: `then` starts the work and says nothing more of its types.
      eachIteration: () =>
        ({
          then(resolve: (value: unknown) => void) {
            events.push('then called');
            setTimeout(() => {
              finished = true;
              resolve(undefined);
            }, 20);
          },
        }) as PromiseLike<unknown>,
    });
    b.on('slice:done', () => void events.push(finished ? 'done after it settled' : 'done too early'));
    await b.performBatchLater(['1'], { key: 'k' });
    b.createWorker();
    await waitFor(() => events.length === 2, { what: 'the slice to end' });
    expect(events).toEqual(['then called', 'done after it settled']);
  });
});

describe("a shared queue: a job of the caller's own is never the key's job", () => {
  const KEY = 'acct 7';
  const ourJobs = async (queue: Queue) =>
    (await queue.getJobs(['waiting', 'prioritized', 'delayed', 'active'])).filter((job) => job?.name === JOB_NAME);
  /** A job of the caller's own, delayed a minute; with `id`, it holds that deduplication id. */
  const delayedOwn = (queue: Queue, id?: string) =>
    queue.add('reminder', { to: 'a' }, { delay: 60_000, ...(id !== undefined && { deduplication: { id } }) });
  /** The key's job pointer made to name job `jobId`, as a stale pointer whose id a job of the caller's took could. */
  const pointTo = (queue: Queue, jobId: string) => redisClient().set(jobPointerOf(queue.toKey(''), KEY), jobId);

  it("one holding the key's encoded form as its deduplication id takes nothing from the key, and is left as it was", async () => {
    const rec = new Recorder();
    // A sweep far away: only the push can get the ids run within the test.
    const b = testBatcher({ eachIteration: rec.handler, recoveryIntervalMs: 600_000 });
    const others: string[] = [];
    const worker = track(
      new Worker(
        b.name,
        b.processor((job) => {
          others.push(job.name);
          return Promise.resolve();
        }),
        bullOptions(b.name),
      ),
    );
    b.attach(worker);
    const queue = track(new Queue(b.name, bullOptions(b.name)));
    const mine = await delayedOwn(queue, encodeKey(KEY));
    const redis = redisClient();
    const scoreBefore = await redis.zscore(queue.toKey('delayed'), mine.id!);
    await b.performBatchLater(['1', '2'], { key: KEY });
    await waitFor(() => rec.all.length === 2, { timeoutMs: 5_000, what: "the key's ids, well before any sweep" });
    expect(rec.idsOf(KEY)).toEqual(['1', '2']);
    // A second push, while the key's job may still be finishing, is served too.
    await b.performBatchLater(['3'], { key: KEY });
    await waitFor(() => rec.all.length === 3, { timeoutMs: 5_000, what: 'the second push' });
    const after = await queue.getJob(mine.id!);
    expect(await after!.getState()).toBe('delayed');
    expect(after!.delay).toBe(60_000);
    expect(await redis.zscore(queue.toKey('delayed'), mine.id!)).toBe(scoreBefore);
    expect(await queue.getDeduplicationJobId(encodeKey(KEY))).toBe(mine.id);
    expect(others).toEqual([]);
  });

  it('one the key’s pointer names is no cover for a push, and the key keeps one job of ours however its pushes go', async () => {
    const rec = new Recorder();
    const b = testBatcher({ eachIteration: rec.handler, sliceSize: 2, recoveryIntervalMs: 600_000 });
    const queue = track(new Queue(b.name, bullOptions(b.name)));
    // Waiting (no worker yet): a push that took it for the key's job would add none.
    const mine = await queue.add('reminder', { to: 'a' });
    await pointTo(queue, mine.id!);
    await b.performBatchLater(['1'], { key: KEY });
    const [ours, ...more] = await ourJobs(queue);
    expect(more).toEqual([]);
    expect(ours!.data).toEqual({ key: KEY });
    expect(ours!.opts).toMatchObject({ attempts: 1, removeOnComplete: true, removeOnFail: { count: 1000 } });
    expect(ours!.opts.deduplication).toBeUndefined();
    expect(await redisClient().get(jobPointerOf(queue.toKey(''), KEY))).toBe(ours!.id);
    // A light push and a heavy one (its job added after the push's call): each finds the key's one job.
    await b.performBatchLater(['2'], { key: KEY });
    await b.performBatchLater(['3', '4', '5'], { key: KEY });
    expect((await ourJobs(queue)).map((job) => job.id)).toEqual([ours!.id]);
    expect(await (await queue.getJob(mine.id!))!.getState()).toBe('waiting');
    b.createWorker();
    await waitFor(() => rec.all.length === 5, { timeoutMs: 5_000, what: 'every id of the key' });
    expect([...rec.idsOf(KEY)].sort()).toEqual(['1', '2', '3', '4', '5']);
  });

  it('a delayed push (zset) waits its time, not that job’s, and leaves that job as it was', async () => {
    const rec = new Recorder();
    const b = testBatcher({ eachIteration: rec.handler, store: 'zset', recoveryIntervalMs: 600_000 });
    const queue = track(new Queue(b.name, bullOptions(b.name)));
    const mine = await delayedOwn(queue);
    await pointTo(queue, mine.id!);
    await b.performBatchLater(['1'], { key: KEY, delayMs: 200 });
    expect((await ourJobs(queue)).map((job) => job.data as unknown)).toEqual([{ key: KEY }]);
    b.createWorker();
    await waitFor(() => rec.all.length === 1, { timeoutMs: 5_000, what: 'the delayed id' });
    expect((await queue.getJob(mine.id!))!.delay).toBe(60_000);
  });

  it('the recovery sweep adds a stranded key its job beside that job, once', async () => {
    const b = testBatcher({ eachIteration: () => {} });
    const queue = track(new Queue(b.name, bullOptions(b.name)));
    const mine = await delayedOwn(queue);
    await pointTo(queue, mine.id!);
    const redis = redisClient();
    const keyspace = keyspaceOf(b);
    // What a pusher that died before adding the job leaves.
    await redis.zadd(keyspace.index, Date.now() - 1000, KEY);
    await redis.rpush(keyspace.forKey(KEY).pending, 'x');
    expect(await b.recover()).toBe(1);
    expect(await b.recover()).toBe(0);
    expect((await ourJobs(queue)).map((job) => job.data as unknown)).toEqual([{ key: KEY }]);
    expect((await queue.getJob(mine.id!))!.delay).toBe(60_000);
  });
});
