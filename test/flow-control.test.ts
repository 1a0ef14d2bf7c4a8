import { describe, expect, it } from 'vitest';
import { InvalidOptionError, NotPausedError, parseRetryAfter, RateLimitedError, type Batcher, type RateLimit } from '../src';
import { Gate } from './helpers/gate';
import { RETRY_AFTER_FLOOR_MS } from '../src/core/limits';
import { startWorkerProcess, stopProcess } from './helpers/processes';
import {
  keysMatching,
  keyspaceOf,
  onCluster,
  queueOf,
  range,
  Recorder,
  redisClient,
  redisUrl,
  testBatcher,
  waitFor,
} from './helpers/redis';
import { busiestWindow, sleep } from './helpers/time';

/**
 * Pushes a sentinel to `other` and waits for it to be processed, so the worker has certainly
 * looked at every key pushed to before.
 */
async function sentinel(b: Batcher, rec: Recorder, other: string): Promise<void> {
  const before = rec.idsOf(other).length;
  await b.performBatchLater(['s'], { key: other });
  await waitFor(() => rec.idsOf(other).length > before, { what: `the sentinel of ${other}` });
}

describe('rateLimit', () => {
  it('claims at most max ids in any window, and processes every id', async () => {
    const limit: RateLimit = { max: 20, durationMs: 400 };
    const slices: [number, number][] = [];
    const b = testBatcher({ sliceSize: 10, rateLimit: limit, eachIteration: (ids) => void slices.push([Date.now(), ids.length]) });
    b.createWorker({ concurrency: 4 });
    await b.performBatchLater(range(100), { key: 'a' });
    await waitFor(() => slices.reduce((n, s) => n + s[1], 0) === 100, { what: 'all 100 ids' });
    // Handler starts lag their claims by a few ms, more on a loaded machine (the claims' windows
    // are exact, see the bench): 50 ms of slack keeps this about the limit, as below.
    expect(busiestWindow(slices, limit.durationMs - 50)).toBeLessThanOrEqual(limit.max);
    // 100 ids at 20 per 400 ms: the last slice starts at least 4 windows after the first.
    expect(slices.at(-1)![0] - slices[0]![0]).toBeGreaterThanOrEqual(4 * limit.durationMs - 10);
  });

  // The worker processes connect by URL (a standalone server).
  it.skipIf(onCluster())('holds across two worker processes (the window is in Redis)', async () => {
    const limit: RateLimit = { max: 30, durationMs: 500 };
    const b = testBatcher({ sliceSize: 10, eachIteration: () => {} });
    const redis = redisClient();
    const options = { sliceSize: 10, rateLimit: limit };
    const workers = await Promise.all(
      [0, 1].map(() => startWorkerProcess({ redisUrl: redisUrl(), name: b.name, options, worker: { concurrency: 4 } })),
    );
    try {
      await b.performBatchLater(range(150), { key: 'a' });
      await waitFor(async () => (await redis.llen(`${b.name}:processed`)) === 150, { what: 'all 150 ids', timeoutMs: 30_000 });
      const slices = (await redis.lrange(`${b.name}:slices`, 0, -1)).map((s) => s.split(' ').map(Number) as [number, number]);
      // Handler starts lag their claims by a few ms, more on a loaded machine (the claims'
      // windows are exact, see the bench); 50 ms of slack keeps this about the limit.
      expect(busiestWindow(slices, limit.durationMs - 50)).toBeLessThanOrEqual(limit.max);
      expect((await redis.lrange(`${b.name}:processed`, 0, -1)).sort()).toEqual(range(150).sort());
      expect(Number(await redis.get(`${b.name}:overlaps`))).toBe(0);
    } finally {
      await Promise.all(workers.map((w) => stopProcess(w)));
    }
  });

  it('a limited key out of room holds no worker slot: another key runs meanwhile', async () => {
    const rec = new Recorder();
    const b = testBatcher({
      sliceSize: 10,
      rateLimit: (key) => (key === 'limited' ? { max: 10, durationMs: 60_000 } : undefined),
      eachIteration: rec.handler,
    });
    b.createWorker({ concurrency: 1 });
    await b.performBatchLater(range(30), { key: 'limited' });
    await waitFor(() => rec.idsOf('limited').length === 10, { what: "the limited key's first slice" });
    await b.performBatchLater(range(50, 'f'), { key: 'free' });
    await waitFor(() => rec.idsOf('free').length === 50, { what: 'the free key' });
    expect(rec.idsOf('limited')).toEqual(range(10));
    expect(await b.backlog('limited')).toEqual({ pending: 20, inFlight: 0, retrying: 0 });
  });

  it("a limited key whose window has room again gets a slot between a heavy key's slices, not after its budget", async () => {
    const rec = new Recorder();
    const b = testBatcher({
      sliceSize: 10,
      maxRuntimeMs: 60_000,
      rateLimit: (key) => (key === 'limited' ? { max: 20, durationMs: 300 } : undefined),
      eachIteration: async (ids, ctx) => {
        rec.handler(ids, ctx);
        if (ctx.key === 'heavy') await sleep(2);
      },
    });
    // Both first pushes are bigger than a slice: both start as heavy newcomers.
    await b.performBatchLater(range(60), { key: 'limited' });
    await b.performBatchLater(range(5000), { key: 'heavy' });
    b.createWorker({ concurrency: 1 });
    await waitFor(() => rec.idsOf('limited').length === 60, { what: 'the limited key, window after window', timeoutMs: 30_000 });
    // It got its slices while the heavy key still ran (whose budget is a minute).
    expect((await b.backlog('heavy')).pending).toBeGreaterThan(0);
  });

  it('a push to a key waiting out its window does not start a run', async () => {
    const rec = new Recorder();
    const b = testBatcher({ sliceSize: 5, rateLimit: { max: 5, durationMs: 60_000 }, eachIteration: rec.handler });
    const worker = b.createWorker({ concurrency: 1 });
    let started = 0;
    worker.on('active', () => started++);
    await b.performBatchLater(range(10), { key: 'a' });
    await waitFor(() => rec.idsOf('a').length === 5, { what: 'the first slice' });
    await waitFor(async () => (await queueState(b)) === 'delayed', { what: 'the job to wait' });
    const before = started;
    for (let i = 0; i < 5; i++) await b.performBatchLater([`x${i}`], { key: 'a' });
    await sentinel(b, rec, 'other');
    // Only the sentinel's job ran: the pushes left the held key's job delayed.
    expect(started - before).toBe(1);
    expect(rec.idsOf('a')).toEqual(range(5));
  });

  it('rejects a bad limit before anything is written', () => {
    for (const bad of [
      { max: 0, durationMs: 1000 },
      { max: -1, durationMs: 1000 },
      { max: 5, durationMs: Infinity },
      { max: 5, durationMs: 2 ** 31 },
      { max: 1.5, durationMs: 10 },
      'fast',
    ]) {
      expect(() => testBatcher({ rateLimit: bad as RateLimit, eachIteration: () => {} })).toThrow(InvalidOptionError);
    }
  });
});

async function queueState(b: Batcher): Promise<string | undefined> {
  const jobs = await queueOf(b).getJobs(['delayed', 'wait', 'active', 'prioritized']);
  return jobs.length === 1 ? await jobs[0]!.getState() : undefined;
}

describe('a rateLimit function that fails', () => {
  it.each([
    [
      'throws',
      () => {
        throw new Error('limits service down');
      },
    ],
    ['returns garbage', (): RateLimit => ({ max: -1, durationMs: Number.NaN })],
  ])(
    '%s: the key is retried after the backoff, never failed or stranded, and its ids run once the function works',
    async (_what, broken) => {
      const rec = new Recorder();
      const warnings: string[] = [];
      let failing = true;
      const b = testBatcher({
        backoff: { type: 'fixed', delayMs: 50 },
        rateLimit: (key) => (failing ? broken() : key === 'k' ? { max: 100, durationMs: 1000 } : undefined),
        logger: { warn: (message) => void warnings.push(message) },
        eachIteration: rec.handler,
      });
      b.createWorker();
      await b.performBatchLater(['1', '2'], { key: 'k' });
      await waitFor(() => warnings.filter((w) => w.includes('retrying the key')).length >= 2, { what: 'two retries' });
      expect(rec.all).toEqual([]);
      expect((await queueOf(b).getJobCounts('failed')).failed).toBe(0);
      failing = false;
      await waitFor(() => rec.all.length === 2, { what: 'the ids once the limit works' });
      expect(rec.idsOf('k')).toEqual(['1', '2']);
    },
  );
});

describe('retryAfter', () => {
  it('puts the slice back unchanged, spends no attempt, and holds the key for the time asked', async () => {
    const seen: { ids: string[]; attempt: number; at: number }[] = [];
    let failed = 0;
    const b = testBatcher({
      sliceSize: 10,
      eachIteration: (ids, ctx) => {
        seen.push({ ids: [...ids], attempt: ctx.attempt, at: Date.now() });
        if (seen.length === 2) ctx.retryAfter(700);
      },
    });
    b.on('slice:failed', () => failed++);
    const reasons: string[] = [];
    b.on('interrupted', ({ reason }) => reasons.push(reason));
    b.createWorker({ concurrency: 2 });
    await b.performBatchLater(range(30), { key: 'a' });
    await waitFor(() => seen.length === 4, { what: 'every slice' });
    // The second slice ran again whole, as a first attempt, after the hold.
    expect(seen.map((s) => s.ids)).toEqual([
      range(10),
      range(10).map((i) => String(Number(i) + 10)),
      range(10).map((i) => String(Number(i) + 10)),
      range(10).map((i) => String(Number(i) + 20)),
    ]);
    expect(seen.map((s) => s.attempt)).toEqual([1, 1, 1, 1]);
    const waited = seen[2]!.at - seen[1]!.at;
    expect(waited).toBeGreaterThanOrEqual(690);
    expect(waited).toBeLessThan(700 + 400);
    expect(failed).toBe(0);
    expect(reasons).toEqual(['rate_limited']);
    expect(await b.backlog('a')).toEqual({ pending: 0, inFlight: 0, retrying: 0 });
  });

  it('a thrown RateLimitedError frees the worker slot: another key runs while the key waits', async () => {
    const rec = new Recorder();
    let limitedOnce = false;
    const b = testBatcher({
      sliceSize: 10,
      eachIteration: (ids, ctx) => {
        if (ctx.key === 'slow' && !limitedOnce) {
          limitedOnce = true;
          throw new RateLimitedError({ retryAfterMs: 60_000 });
        }
        rec.handler(ids, ctx);
      },
    });
    b.createWorker({ concurrency: 1 });
    await b.performBatchLater(range(10), { key: 'slow' });
    await waitFor(() => limitedOnce, { what: 'the 429' });
    await b.performBatchLater(range(10), { key: 'other' });
    await waitFor(() => rec.idsOf('other').length === 10, { what: 'the other key' });
    expect(rec.idsOf('slow')).toEqual([]);
    expect(await b.backlog('slow')).toEqual({ pending: 10, inFlight: 0, retrying: 0 });
  });

  it('retries a failed slice held by a 429 as the same attempt', async () => {
    const attempts: number[] = [];
    const b = testBatcher({
      sliceSize: 5,
      backoff: { type: 'fixed', delayMs: 0 },
      eachIteration: (_ids, ctx) => {
        attempts.push(ctx.attempt);
        if (attempts.length === 1) throw new Error('boom');
        if (attempts.length === 2) ctx.retryAfter(50);
      },
    });
    b.createWorker();
    await b.performBatchLater(range(5), { key: 'a' });
    await waitFor(() => attempts.length === 3, { what: 'three runs' });
    expect(attempts).toEqual([1, 2, 2]);
  });

  it('retryAfter(0) over and over is held at a floor that doubles per ask, and a success ends the streak', async () => {
    const starts: number[] = [];
    let asking = true;
    const b = testBatcher({
      eachIteration(ids, ctx) {
        starts.push(Date.now());
        // An upstream answering 429 with a Retry-After date in the past: "wait 0 ms".
        if (asking) ctx.retryAfter(0);
      },
    });
    b.createWorker();
    await b.performBatchLater(['x'], { key: 'k' });
    await waitFor(() => starts.length >= 4, { what: 'four asks', timeoutMs: 10_000 });
    const gaps = starts.slice(1).map((at, i) => at - starts[i]!);
    // 100, 200, 400 ms (a few ms early at most: the hold is timed by Redis, the job's delay by BullMQ).
    gaps.forEach((gap, i) => expect(gap).toBeGreaterThanOrEqual(RETRY_AFTER_FLOOR_MS * 2 ** i - 15));
    asking = false;
    await waitFor(async () => (await b.backlog('k')).pending === 0 && starts.length >= 5, { what: 'the slice to succeed' });
    const names = keyspaceOf(b).forKey('k');
    await waitFor(async () => (await redisClient().exists(names.retryAfterStreak)) === 0, { what: 'the streak to end' });
  });

  it('rejects a bad retryAfterMs', () => {
    for (const bad of [-1, Number.NaN, Infinity, 2 ** 31])
      expect(() => new RateLimitedError({ retryAfterMs: bad })).toThrow(InvalidOptionError);
    expect(new RateLimitedError({ retryAfterMs: 1.2 }).retryAfterMs).toBe(2);
  });
});

describe('parseRetryAfter', () => {
  it('reads delay-seconds and HTTP-dates; undefined for anything else', () => {
    const now = Date.parse('Wed, 21 Oct 2026 07:28:00 GMT');
    expect(parseRetryAfter('120', now)).toBe(120_000);
    expect(parseRetryAfter(' 0 ', now)).toBe(0);
    expect(parseRetryAfter('Wed, 21 Oct 2026 07:28:30 GMT', now)).toBe(30_000);
    expect(parseRetryAfter('Wed, 21 Oct 2026 07:00:00 GMT', now)).toBe(0);
    for (const bad of [undefined, null, '', '-5', '1.5', 'soon', '12abc']) expect(parseRetryAfter(bad, now)).toBeUndefined();
  });
});

describe('pause and resume', () => {
  it('a paused key runs nothing, across a worker restart, and everything after resume', async () => {
    const rec = new Recorder();
    const b = testBatcher({ sliceSize: 10, eachIteration: rec.handler });
    await b.pause('a');
    await b.performBatchLater(range(25), { key: 'a' });
    const first = b.createWorker({ concurrency: 1 });
    await sentinel(b, rec, 'other');
    await first.close();
    b.createWorker({ concurrency: 1 });
    await b.recover();
    await sentinel(b, rec, 'other');
    expect(rec.idsOf('a')).toEqual([]);
    expect(await b.backlog('a')).toEqual({ pending: 25, inFlight: 0, retrying: 0 });
    expect(await b.paused()).toEqual([{ key: 'a' }]);

    await b.resume('a');
    await waitFor(() => rec.idsOf('a').length === 25, { what: 'the resumed key' });
    expect(rec.idsOf('a')).toEqual(range(25));
    expect(await b.paused()).toEqual([]);
  });

  it('a running key stops at its next slice boundary and frees its slot', async () => {
    const rec = new Recorder();
    const gate = new Gate();
    const b = testBatcher({
      sliceSize: 10,
      async eachIteration(ids, ctx) {
        rec.handler(ids, ctx);
        if (ctx.key === 'a' && rec.idsOf('a').length === 10) await gate.opened;
      },
    });
    b.createWorker({ concurrency: 1 });
    await b.performBatchLater(range(50), { key: 'a' });
    await waitFor(() => rec.idsOf('a').length === 10, { what: 'the first slice' });
    await b.pause('a');
    await b.performBatchLater(range(5, 'o'), { key: 'other' });
    gate.open();
    await waitFor(() => rec.idsOf('other').length === 5, { what: 'the other key' });
    expect(rec.idsOf('a')).toEqual(range(10));
    expect(await b.backlog('a')).toEqual({ pending: 40, inFlight: 0, retrying: 0 });
    await b.resume('a');
    await waitFor(() => rec.idsOf('a').length === 50, { what: 'the rest' });
    expect(rec.idsOf('a')).toEqual(range(50));
  });

  it('a timed pause ends by itself', async () => {
    const rec = new Recorder();
    const b = testBatcher({ eachIteration: rec.handler });
    b.createWorker();
    const pausedAt = Date.now();
    await b.pause('a', { forMs: 500 });
    const [listed] = await b.paused();
    expect(listed?.key).toBe('a');
    expect(listed?.untilMs).toBeGreaterThanOrEqual(pausedAt + 500);
    await b.performBatchLater(range(5), { key: 'a' });
    await waitFor(() => rec.idsOf('a').length === 5, { what: 'the key after its pause' });
    expect(rec.calls[0]!.at - pausedAt).toBeGreaterThanOrEqual(490);
    expect(await b.paused()).toEqual([]);
  });

  it('resume of a key that is not paused throws NotPausedError; bad pause options throw before any write', async () => {
    const b = testBatcher({ eachIteration: () => {} });
    await expect(b.resume('nobody')).rejects.toThrow(NotPausedError);
    await expect(b.pause('a', { untilMs: Date.now() - 1000 })).rejects.toThrow(InvalidOptionError);
    await expect(b.pause('a', { forMs: 0 })).rejects.toThrow(InvalidOptionError);
    await expect(b.pause('a', { forMs: 2 ** 31 })).rejects.toThrow(InvalidOptionError);
    await expect(b.pause('a', { forMs: 10, untilMs: Date.now() + 1000 })).rejects.toThrow(InvalidOptionError);
    await expect(b.pause('')).rejects.toThrow(/key/);
    expect(await keysMatching(`*${b.name}*paused*`)).toEqual([]);
    await b.pause('a');
    await b.resume('a');
    await expect(b.resume('a')).rejects.toThrow(NotPausedError);
  });

  it.skipIf(onCluster())('pause and resume at the same moment leave the key paused and listed, or neither, every time', async () => {
    const b = testBatcher({ eachIteration: () => {} });
    const redis = redisClient();
    const keyspace = keyspaceOf(b);
    for (let trial = 0; trial < 40; trial++) {
      const key = `race-${trial}`;
      if (trial % 2 === 1) await b.pause(key);
      await Promise.all([b.pause(key), b.resume(key).catch(() => undefined)]);
      const marked = (await redis.exists(keyspace.forKey(key).paused)) === 1;
      const listed = (await redis.zscore(keyspace.pausedIndex, key)) !== null;
      expect({ key, marked, listed }).toEqual({ key, marked: listed, listed });
      expect((await b.paused()).some((p) => p.key === key)).toBe(marked);
      if (marked) await b.resume(key);
    }
  });

  // The race is a Cluster's (marker and index are two calls there), and so is the pause's recovery-index entry.
  it.runIf(onCluster())(
    'a paused key missing from the paused index (a resume that raced a pause on a Cluster) is listed again by the sweep',
    async () => {
      const b = testBatcher({ eachIteration: () => {} });
      const redis = redisClient();
      const keyspace = keyspaceOf(b);
      await b.performBatchLater(['1'], { key: 'held' });
      await b.pause('held', { forMs: 600_000 });
      const [before] = await b.paused();
      await redis.zrem(keyspace.pausedIndex, 'held');
      expect(await b.paused()).toEqual([]);
      await b.recover();
      expect(await b.paused()).toEqual([before]);
    },
  );

  it('resume after a timed pause has ended throws NotPausedError, whether or not paused() ran since', async () => {
    const b = testBatcher({ eachIteration: () => {} });
    await b.pause('a', { forMs: 50 });
    await b.pause('b', { forMs: 50 });
    const names = keyspaceOf(b);
    const ended = async (key: string) => (await redisClient().exists(names.forKey(key).paused)) === 0;
    await waitFor(async () => (await ended('a')) && (await ended('b')), { what: 'both pauses to end' });
    await expect(b.resume('a')).rejects.toThrow(NotPausedError);
    expect(await b.paused()).toEqual([]);
    await expect(b.resume('b')).rejects.toThrow(NotPausedError);
    // The end listed is the Redis clock's: the pause's length after the server's own now.
    const [seconds, micros] = await redisClient().time();
    await b.pause('c', { forMs: 60_000 });
    const [listed] = await b.paused();
    expect(listed!.untilMs! - (Number(seconds) * 1000 + Math.floor(Number(micros) / 1000))).toBeGreaterThanOrEqual(60_000);
  });

  it('pauseAll stops every key from starting, resumeAll lets them run', async () => {
    const rec = new Recorder();
    const b = testBatcher({ eachIteration: rec.handler });
    await b.pauseAll();
    expect(await queueOf(b).isPaused()).toBe(true);
    b.createWorker();
    await b.performBatchLater(range(3), { key: 'a' });
    await b.performBatchLater(range(3), { key: 'b' });
    const redis = redisClient();
    const names = keyspaceOf(b).forKey('a');
    expect(await redis.llen(names.pending)).toBe(3);
    await b.resumeAll();
    await waitFor(() => rec.all.length === 6, { what: 'both keys' });
  });
});
