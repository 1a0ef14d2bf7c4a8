import { describe, expect, it } from 'vitest';
import { JOB_NAME, type Batcher, type EachIteration } from '../src';
import type { KeyQueue } from '../src/storage/job';
import { age } from '../src/engine/scheduling';
import { prefixOf, queueOf, range, Recorder, redisClient, testBatcher, waitFor } from './helpers/redis';
import { sleep } from './helpers/time';

/** Spins for `ms`: a slice that costs CPU, like the bench's handler. */
const busy = (ms: number) => {
  const end = performance.now() + ms;
  while (performance.now() < end);
};

/** Heavy keys pushed (and started) first, then light keys: which finish first? */
async function lightVersusHeavy(scheduling: 'fair' | 'fifo'): Promise<{ lightDone: number; heavyDone: number[] }> {
  const rec = new Recorder();
  const finished = new Map<string, number>();
  const pushed = new Map<string, number>();
  const b: Batcher = testBatcher({
    scheduling,
    sliceSize: 10,
    eachIteration(ids, ctx) {
      busy(2);
      rec.handler(ids, ctx);
      if (rec.idsOf(ctx.key).length === pushed.get(ctx.key)) finished.set(ctx.key, Date.now());
    },
  });
  b.createWorker({ concurrency: 2 });
  for (const key of range(4, 'heavy-')) {
    pushed.set(key, 1000);
    await b.performBatchLater(range(1000), { key });
  }
  await waitFor(() => rec.calls.length >= 4, { what: 'heavy keys to start' });
  for (const key of range(3, 'light-')) {
    pushed.set(key, 10);
    await b.performBatchLater(range(10), { key });
  }
  await waitFor(() => finished.size === 7, { timeoutMs: 30_000, what: 'every key to finish' });
  return {
    lightDone: Math.max(...range(3, 'light-').map((k) => finished.get(k)!)),
    heavyDone: range(4, 'heavy-').map((k) => finished.get(k)!),
  };
}

describe("scheduling: 'fair'", () => {
  it('light keys pushed later finish before heavy keys that were queued earlier', async () => {
    const { lightDone, heavyDone } = await lightVersusHeavy('fair');
    expect(heavyDone.every((t) => t > lightDone)).toBe(true);
  });

  it("with 'fifo' the same light keys wait for heavy runs (the contrast that makes the test above mean something)", async () => {
    const { lightDone, heavyDone } = await lightVersusHeavy('fifo');
    expect(heavyDone.some((t) => t < lightDone)).toBe(true);
  });

  it.each([
    ['fair', (done: number) => expect(done).toBeLessThan(25)],
    ['fifo', (done: number) => expect(done).toBe(50)],
  ] as const)(
    '%s: light keys pushed after a flood split over 50 new keys finish before most of the flood (fair) / after all of it (fifo)',
    async (scheduling, check) => {
      const finished: string[] = [];
      let floodDoneWhenLightDone = -1;
      const sizes = new Map<string, number>();
      const seen = new Map<string, number>();
      const b = testBatcher({
        scheduling,
        sliceSize: 10,
        eachIteration(ids, ctx) {
          busy(2);
          seen.set(ctx.key, (seen.get(ctx.key) ?? 0) + ids.length);
          if (seen.get(ctx.key) === sizes.get(ctx.key)) finished.push(ctx.key);
          if (finished.filter((k) => k.startsWith('light-')).length === 3 && floodDoneWhenLightDone < 0) {
            floodDoneWhenLightDone = finished.filter((k) => k.startsWith('flood-')).length;
          }
        },
      });
      for (const key of range(50, 'flood-')) {
        sizes.set(key, 30);
        await b.performBatchLater(range(30), { key });
      }
      b.createWorker({ concurrency: 1 });
      await waitFor(() => finished.length > 0, { what: 'the flood to start' });
      for (const key of range(3, 'light-')) {
        sizes.set(key, 5);
        await b.performBatchLater(range(5), { key });
      }
      await waitFor(() => finished.length === 53, { timeoutMs: 30_000, what: 'every key' });
      check(floodDoneWhenLightDone);
    },
  );

  it('light keys start in push order (FIFO), and before a heavy newcomer pushed earlier, with one worker slot', async () => {
    const started: string[] = [];
    const b = testBatcher({
      sliceSize: 10,
      eachIteration(_ids, ctx) {
        if (!started.includes(ctx.key)) started.push(ctx.key);
      },
    });
    // Pushed before any worker runs, so the order of the queue alone decides.
    await b.performBatchLater(range(50), { key: 'heavy' });
    const light = range(20, 'light-');
    for (const key of light) await b.performBatchLater(range(3), { key });
    b.createWorker({ concurrency: 1 });
    await waitFor(() => started.length === 21, { what: 'every key to start' });
    expect(started).toEqual([...light, 'heavy']);
  });

  it('no key starves: a key that used its budget still progresses under a stream of new keys (aging)', async () => {
    let heavySlices = 0;
    let pushedFresh = 0;
    const servedFresh = new Map<string, number>();
    const waitingFresh = () => pushedFresh - [...servedFresh.values()].filter((n) => n === 2).length;
    /** Heavy slices that ran while fresh keys pushed before them still had ids waiting. */
    let heavyWhileFreshWaited = 0;
    const handler: EachIteration = (ids, ctx) => {
      busy(10);
      if (ctx.key !== 'heavy') servedFresh.set(ctx.key, (servedFresh.get(ctx.key) ?? 0) + ids.length);
      else {
        heavySlices++;
        if (waitingFresh() > 0) heavyWhileFreshWaited++;
      }
    };
    const b = testBatcher({ sliceSize: 1, maxRuntimeMs: 30, recoveryIntervalMs: 100, eachIteration: handler });
    b.createWorker({ concurrency: 1 });
    await b.performBatchLater(range(10_000), { key: 'heavy' });
    await waitFor(() => heavySlices >= 10, { what: 'the heavy key to use its first budget' });
    // New keys arrive faster than the one worker can serve them: without aging they would always go first.
    let stop = false;
    const stream = (async () => {
      for (let i = 0; !stop; i++) {
        await b.performBatchLater(['x', 'y'], { key: `fresh-${i}` });
        pushedFresh++;
        await sleep(10);
      }
    })();
    try {
      // Counted from when fresh keys queue up: slices of the run in progress when the stream began are no proof.
      await waitFor(() => waitingFresh() >= 3, { what: 'fresh keys to queue up' });
      const before = heavyWhileFreshWaited;
      await waitFor(() => heavyWhileFreshWaited >= before + 5, {
        timeoutMs: 15_000,
        what: 'the heavy key to progress while fresh keys wait',
      });
      // Fresh keys kept waiting all along: the stream outpaced the worker, so only aging let the heavy key in.
      expect(waitingFresh()).toBeGreaterThan(0);
    } finally {
      stop = true;
      await stream;
    }
    // The heavy key did not simply take the worker back either: fresh keys were served throughout.
    expect(servedFresh.size).toBeGreaterThan(3);
  });
});

describe('weight', () => {
  it('a key of weight 3 gets about 3x the slices of a key of weight 1 under contention (within 20%)', async () => {
    const order: string[] = [];
    const b = testBatcher({
      sliceSize: 1,
      maxRuntimeMs: 60,
      weight: (key) => (key === 'gold' ? 3 : 1),
      eachIteration(_ids, ctx) {
        busy(1);
        order.push(ctx.key);
      },
    });
    await b.performBatchLater(range(20_000), { key: 'gold' });
    await b.performBatchLater(range(20_000), { key: 'basic' });
    b.createWorker({ concurrency: 1 });
    await waitFor(() => order.filter((key) => key === 'gold').length >= 1500, { timeoutMs: 30_000, what: 'enough slices' });
    // Counted over whole turns only (up to the last switch from basic back to gold): stopping in
    // the middle of a 180 ms gold turn would skew the ratio by up to a turn's slices.
    const lastSwitch = order.findLastIndex((key, i) => key === 'gold' && order[i - 1] === 'basic');
    expect(lastSwitch).toBeGreaterThan(0);
    const whole = order.slice(0, lastSwitch);
    const count = (key: string) => whole.filter((k) => k === key).length;
    const ratio = count('gold') / count('basic');
    expect(ratio).toBeGreaterThan(3 * 0.8);
    expect(ratio).toBeLessThan(3 * 1.2);
  });

  it('a weight function that throws or returns nonsense counts as 1, with a warning', async () => {
    const warnings: string[] = [];
    const rec = new Recorder();
    const b = testBatcher({
      logger: { warn: (message) => void warnings.push(message) },
      weight: (key) => {
        if (key === 'throws') throw new Error('no tier');
        return Number.NaN;
      },
      eachIteration: rec.handler,
    });
    b.createWorker();
    await b.performBatchLater(['1'], { key: 'throws' });
    await b.performBatchLater(['2'], { key: 'nan' });
    await waitFor(() => rec.all.length === 2);
    expect(warnings).toContain('batch-by-key: the weight function threw; using 1');
    expect(warnings).toContain('batch-by-key: the weight function returned no positive finite number; using 1');
  });
});

describe('aging sweep', () => {
  it('lifts only our prioritized jobs that waited a budget past their run (or since added), and leaves other job names alone', async () => {
    const b = testBatcher({ maxRuntimeMs: 1000, eachIteration: () => {} });
    const queue = queueOf(b) as unknown as KeyQueue;
    const ours = await queue.add(JOB_NAME, { key: 'old' }, { priority: 2 });
    const recent = await queue.add(JOB_NAME, { key: 'recent' }, { priority: 2 });
    const foreign = await queue.add('send-email', { key: 'x' }, { priority: 2 });
    const heavyNew = await queue.add(JOB_NAME, { key: 'heavy-new' }, { priority: 1 });
    const heavyOld = await queue.add(JOB_NAME, { key: 'heavy-old' }, { priority: 1 });
    const redis = redisClient();
    const jobKey = (id: string | undefined) => `${prefixOf(b.name)}:${b.name}:${id}`;
    // Their last runs started 5 s ago (ours, foreign) and just now (recent).
    await redis.hset(jobKey(ours.id), 'processedOn', Date.now() - 5000);
    await redis.hset(jobKey(foreign.id), 'processedOn', Date.now() - 5000);
    await redis.hset(jobKey(recent.id), 'processedOn', Date.now());
    // A heavy newcomer that never ran counts from when it was added.
    await redis.hset(jobKey(heavyOld.id), 'timestamp', Date.now() - 5000);
    expect(await age(queue, [1, 2], 1000, () => 1000)).toBe(2);
    expect(await queue.getJobState(ours.id!)).toBe('waiting');
    expect(await queue.getJobState(heavyOld.id!)).toBe('waiting');
    expect(await queue.getJobState(heavyNew.id!)).toBe('prioritized');
    expect(await queue.getJobState(recent.id!)).toBe('prioritized');
    expect(await queue.getJobState(foreign.id!)).toBe('prioritized');
    // A heavier key's longer budget counts: 5 s ago is not long enough for a 10 s budget.
    await queue.add(JOB_NAME, { key: 'gold' }, { priority: 2 }).then((job) => redis.hset(jobKey(job.id), 'processedOn', Date.now() - 5000));
    expect(await age(queue, [1, 2], 1000, (key) => (key === 'gold' ? 10_000 : 1000))).toBe(0);
  });

  it('looks at the oldest jobs of every level: a long line of young jobs at one level hides no old job at the next', async () => {
    const b = testBatcher({ maxRuntimeMs: 1000, eachIteration: () => {} });
    const queue = queueOf(b) as unknown as KeyQueue;
    await queue.addBulk(range(150, 'young-').map((key) => ({ name: JOB_NAME, data: { key }, opts: { priority: 1 } })));
    const old = await queue.add(JOB_NAME, { key: 'old' }, { priority: 2 });
    await redisClient().hset(`${prefixOf(b.name)}:${b.name}:${old.id}`, 'processedOn', Date.now() - 5000);
    expect(await age(queue, [1, 2], 1000, () => 1000)).toBe(1);
    expect(await queue.getJobState(old.id!)).toBe('waiting');
  });
});
