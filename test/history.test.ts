import { describe, expect, it } from 'vitest';
import { batchByKey, DEFAULTS, InvalidOptionError, MAX_TIMER_MS, type EachIteration } from '../src';
import { decodeSamples, encodeSample, MAX_SAMPLED_KEY } from '../src/ops/history';
import type { Stats } from '../src';
import { validateHistoryOption } from '../src/ops/history-options';
import { defineScripts, runScript } from '../src/storage/scripts';
import { Gate } from './helpers/gate';
import { keyspaceOf, keysMatching, range, redisClient, testBatcher, testConnection, track, uniqueName, waitFor } from './helpers/redis';

const FAST = { intervalMs: 100 };
const bucketOf = (at: number, intervalMs = FAST.intervalMs) => Math.floor(at / intervalMs);

describe('history: sampling shared by every worker process', () => {
  it('two worker processes take one sample per interval between them, and count the ids of both once', async () => {
    const name = uniqueName('history');
    const gate = new Gate();
    const bothBusy = new Gate();
    const started = new Set<number>();
    const processed = [0, 0];
    // Each process holds its slices until both have one and the test has seen a sample of the
    // backlog: so both processes count ids, and a sample shows the keys waiting.
    const handler =
      (process: number): EachIteration =>
      async (ids) => {
        started.add(process);
        if (started.size === 2) bothBusy.open();
        await Promise.all([bothBusy.opened, gate.opened]);
        processed[process]! += ids.length;
      };
    const [a, b] = [
      testBatcher({ name, sliceSize: 10, history: FAST, eachIteration: handler(0) }),
      testBatcher({ name, sliceSize: 10, history: FAST, eachIteration: handler(1) }),
    ];
    for (const key of ['k1', 'k2', 'k3', 'k4']) await a.performBatchLater(range(50), { key });
    a.createWorker({ concurrency: 2 });
    b.createWorker({ concurrency: 2 });

    await waitFor(
      async () =>
        (await a.history()).samples.some((s) => s.pending > 0 && s.topKeys.length === 4 && s.topKeys.every((k) => k.backlog === 40)),
      { what: 'a sample of the four keys waiting' },
    );
    gate.open();
    await waitFor(() => processed[0]! + processed[1]! === 200, { what: 'every id processed' });
    const redis = redisClient();
    // Each process adds its count at its next tick.
    await waitFor(async () => Number(await redis.get(keyspaceOf(a).history.processed)) === 200, {
      what: 'both counts in the shared counter',
    });
    await waitFor(async () => (await a.history()).samples.at(-1)?.pending === 0, { what: 'a sample of the drained batcher' });

    // Any process reads it, a producer too.
    const producer = track(batchByKey({ name, connection: testConnection() }));
    const { samples, at } = await producer.history();
    expect(processed.every((n) => n > 0)).toBe(true);
    const buckets = samples.map((s) => bucketOf(s.at));
    expect(new Set(buckets).size).toBe(buckets.length);
    expect(buckets).toEqual([...buckets].sort((x, y) => x - y));
    expect(at).toBeGreaterThanOrEqual(samples.at(-1)!.at);
    expect(samples.some((s) => (s.idsPerSec ?? 0) > 0)).toBe(true);
    expect(samples.at(-1)).toMatchObject({
      keys: 0,
      pending: 0,
      inFlight: 0,
      retrying: 0,
      dead: 0,
      oldestPendingAgeMs: 0,
      topKeys: [],
      truncated: false,
    });
  });

  it('keeps retentionMs / intervalMs samples: the oldest go', async () => {
    const b = testBatcher({ history: { intervalMs: 100, retentionMs: 500 }, eachIteration: () => {} });
    b.createWorker();
    const full = await waitFor(
      async () => {
        const { samples } = await b.history();
        return samples.length === 5 ? samples : undefined;
      },
      { what: 'five samples' },
    );
    const rolled = await waitFor(
      async () => {
        const { samples } = await b.history();
        return samples[0]!.at > full[0]!.at ? samples : undefined;
      },
      { what: 'the oldest sample gone' },
    );
    expect(rolled).toHaveLength(5);
    expect(await redisClient().llen(keyspaceOf(b).history.series)).toBe(5);
  });

  it('records topKeys keys by ids waiting and as many by lag; topKeys: 0 the totals alone', async () => {
    const [one, none] = [
      testBatcher({ history: { ...FAST, topKeys: 1 }, eachIteration: () => {} }),
      testBatcher({ history: { ...FAST, topKeys: 0 }, eachIteration: () => {} }),
    ];
    for (const b of [one, none]) {
      // Paused, the keys keep their ids while the worker samples.
      await b.pause('old');
      await b.pause('big');
      await b.performBatchLater(['1'], { key: 'old' });
      // 'old' is the laggiest only if pushed in an earlier millisecond than the others.
      const pushedAt = Date.now();
      await waitFor(() => Date.now() > pushedAt + 1, { intervalMs: 1, what: 'the clock to move' });
      await b.performBatchLater(range(5), { key: 'big' });
      await b.performBatchLater(range(3), { key: 'mid' });
      await b.pause('mid');
      b.createWorker();
    }
    const sampled = async (b: typeof one) =>
      await waitFor(async () => (await b.history()).samples.find((s) => s.pending === 9), { what: 'a sample of the paused keys' });
    expect((await sampled(one)).topKeys.map((k) => [k.key, k.backlog])).toEqual([
      ['big', 5],
      ['old', 1],
    ]);
    expect((await sampled(none)).topKeys).toEqual([]);
  });

  it('samples only while a worker runs, and not at all with history: false', async () => {
    const off = testBatcher({ history: false, eachIteration: () => {} });
    const stopped = testBatcher({ history: FAST, eachIteration: () => {} });
    const stoppedWorker = stopped.createWorker();
    await waitFor(async () => (await stopped.history()).samples.length >= 1, { what: 'a first sample' });
    await stoppedWorker.close();
    const kept = (await stopped.history()).samples.length;
    await off.performBatchLater(range(5), { key: 'k' });
    off.createWorker();
    await waitFor(async () => (await off.stats()).keys === 0, { what: 'the ids processed' });
    // A batcher that samples shows that intervals went by meanwhile.
    const control = testBatcher({ history: FAST, eachIteration: () => {} });
    control.createWorker();
    await waitFor(async () => (await control.history()).samples.length >= 3, { what: 'three samples of another batcher' });
    expect((await off.history()).samples).toEqual([]);
    expect(await keysMatching(`${keyspaceOf(off).root}*history*`)).toEqual([]);
    expect((await stopped.history()).samples).toHaveLength(kept);
  });
});

describe('history scripts', () => {
  it('history-tick claims each interval once and sums counts; history-append keeps one sample per interval, in order, capped', async () => {
    const b = testBatcher({ history: false, eachIteration: () => {} });
    const names = keyspaceOf(b).history;
    const redis = redisClient();
    defineScripts(redis);
    // An interval of ~25 days: both calls fall in one bucket.
    const tick = async (count: number) =>
      (await runScript(redis, 'history-tick', [names.claim, names.processed], [count, MAX_TIMER_MS, 60_000])) as [number, number, number];
    const [first, second, third] = [await tick(5), await tick(7), await tick(0)];
    expect([first[0], first[2]]).toEqual([1, 5]);
    expect([second[0], second[2]]).toEqual([0, 12]);
    expect([third[0], third[2]]).toEqual([0, 12]);
    expect(await redis.pttl(names.processed)).toBeGreaterThan(0);
    expect(await redis.pttl(names.claim)).toBeGreaterThan(0);

    const append = (at: number) => runScript(redis, 'history-append', [names.series], [`${at} 0 0 0 0 0 0 0 0`, 1000, 3, 60_000]);
    const appended: unknown[] = [];
    for (const at of [1000, 1999, 2000, 1500, 3000, 4000, 5000]) appended.push(await append(at));
    expect(appended).toEqual([1, 0, 1, 0, 1, 1, 1]);
    expect((await redis.lrange(names.series, 0, -1)).map((e) => e.split(' ')[0])).toEqual(['3000', '4000', '5000']);
    expect(await redis.pttl(names.series)).toBeGreaterThan(0);
  });

  it('history() returns the samples as written: totals, top keys (any key string) and ids/s between samples', async () => {
    const b = testBatcher({ history: false, eachIteration: () => {} });
    const odd = ['a b', '%61', 'ключ 🙂', 'x:{y}', '<b>k</b>'];
    for (const [i, key] of odd.entries()) await b.performBatchLater(range(i + 1), { key });
    const stats = await b.stats({ top: 5 });
    const names = keyspaceOf(b).history;
    const redis = redisClient();
    defineScripts(redis);
    const t0 = 1_700_000_000_000;
    const append = (entry: string) => runScript(redis, 'history-append', [names.series], [entry, 10_000, 360, 60_000]);
    await append(encodeSample(t0, 100, stats, 5));
    await append(encodeSample(t0 + 10_000, 600, stats, 5));
    await redis.rpush(names.series, 'written by something else');
    await append(encodeSample(t0 + 20_000, 7, stats, 5)); // the counter was reset

    const { samples, name } = await b.history();
    expect(name).toBe(b.name);
    expect(samples.map((s) => s.idsPerSec)).toEqual([undefined, 50, undefined]);
    const expected = {
      keys: 5,
      pending: 15,
      inFlight: 0,
      retrying: 0,
      dead: 0,
      oldestPendingAgeMs: stats.oldestPendingAgeMs,
      truncated: false,
      topKeys: [...odd].reverse().map((key) => ({
        key,
        backlog: odd.indexOf(key) + 1,
        oldestPendingAgeMs: stats.topKeys.find((k) => k.key === key)!.oldestPendingAgeMs,
      })),
    };
    expect(samples[1]).toEqual({ at: t0 + 10_000, idsPerSec: 50, ...expected });
    expect(samples[0]).toEqual({ at: t0, ...expected });
  });
});

describe('history option', () => {
  it('takes false, true or { intervalMs, retentionMs, topKeys } and refuses anything else with InvalidOptionError', () => {
    const make = (history: unknown) => () =>
      batchByKey({ name: 'history-options', connection: testConnection(), eachIteration: () => {}, history: history as never });
    for (const ok of [
      undefined,
      true,
      false,
      {},
      { intervalMs: 100 },
      { intervalMs: 1000, retentionMs: 1000 },
      { intervalMs: 100, retentionMs: 1_000_000 },
      { intervalMs: MAX_TIMER_MS },
      { topKeys: 0 },
      { topKeys: 10 },
    ]) {
      expect(make(ok)).not.toThrow();
    }
    const bad: [unknown, RegExp][] = [
      ['yes', /options.history must be false or \{ intervalMs\?, retentionMs\?, topKeys\? \}, got "yes"/],
      [null, /options.history must be false or/],
      [[], /options.history must be false or/],
      [{ interval: 5000 }, /options.history takes intervalMs, retentionMs and topKeys, got interval/],
      [{ toString: 5000 }, /options.history takes intervalMs, retentionMs and topKeys, got toString/],
      [{ topKeys: 11 }, /options.history.topKeys must be an integer between 0 and 10, got number 11/],
      [{ topKeys: -1 }, /topKeys must be an integer/],
      [{ topKeys: 2.5 }, /topKeys must be an integer/],
      [{ intervalMs: 99 }, /options.history.intervalMs must be an integer between 100 and 2147483647, got number 99/],
      [{ intervalMs: 150.5 }, /intervalMs must be an integer/],
      [{ intervalMs: MAX_TIMER_MS + 1 }, /intervalMs must be an integer/],
      [{ intervalMs: '1000' }, /intervalMs must be an integer/],
      [
        { intervalMs: 1000, retentionMs: 999 },
        /retentionMs must be an integer between intervalMs and 10000 × intervalMs \(1000 to 10000000\), got number 999/,
      ],
      [{ intervalMs: 100, retentionMs: 1_000_001 }, /retentionMs must be an integer between intervalMs/],
      [{ retentionMs: Number.NaN }, /retentionMs must be an integer/],
    ];
    for (const [value, message] of bad) {
      expect(make(value)).toThrow(InvalidOptionError);
      expect(make(value)).toThrow(message);
    }
  });

  it('defaults to a sample every 10 s kept an hour with 5 top keys; a short interval keeps 10,000 samples at most, a long one one', () => {
    const defaults = { intervalMs: 10_000, retentionMs: 3_600_000, topKeys: 5 };
    expect(DEFAULTS.history).toEqual(defaults);
    expect(validateHistoryOption(undefined)).toEqual(defaults);
    expect(validateHistoryOption(true)).toEqual(defaults);
    expect(validateHistoryOption({ retentionMs: 600_000, topKeys: 0 })).toEqual({ intervalMs: 10_000, retentionMs: 600_000, topKeys: 0 });
    expect(validateHistoryOption({ intervalMs: 100 })).toEqual({ intervalMs: 100, retentionMs: 1_000_000, topKeys: 5 });
    expect(validateHistoryOption({ intervalMs: 7_200_000 })).toEqual({ intervalMs: 7_200_000, retentionMs: 7_200_000, topKeys: 5 });
    expect(validateHistoryOption(false)).toBe(false);
  });
});

describe('history samples with long key names', () => {
  it('keep at most MAX_SAMPLED_KEY code units of a name, well-formed, so a sample stays small', () => {
    const long = '鍵🙂'.repeat(400); // 1,200 code units, surrogate pairs included
    const stats = {
      name: 'b',
      keys: 1,
      pending: 1,
      inFlight: 0,
      retrying: 0,
      dead: 0,
      oldestPendingAgeMs: 5,
      truncated: false,
      scannedKeys: 1,
      topKeys: [{ key: long, pending: 1, inFlight: 0, retrying: 0, oldestPendingAgeMs: 5 }],
      laggingKeys: [],
      paused: [],
    } as unknown as Stats;
    const sample = encodeSample(Date.now(), 0, stats, 5);
    expect(sample.length).toBeLessThan(1_000);
    const [key] = decodeSamples([sample])[0]!.topKeys;
    expect(key!.key.length).toBeLessThanOrEqual(MAX_SAMPLED_KEY);
    expect(key!.key.isWellFormed()).toBe(true);
    expect(key!.key.endsWith('…')).toBe(true);
    expect(long.startsWith(key!.key.slice(0, -1))).toBe(true);
  });
});
