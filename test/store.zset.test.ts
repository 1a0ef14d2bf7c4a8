import { Queue } from 'bullmq';
import { describe, expect, it } from 'vitest';
import type { KeyJobData } from '../src';
import { parseUrl, Recorder, redisUrl, testBatcher, track, waitFor } from './helpers/redis';

function setup() {
  const rec = new Recorder();
  const b = testBatcher({ store: 'zset', eachIteration: rec.handler });
  const queue = track(new Queue<KeyJobData>(b.name, { connection: parseUrl(redisUrl()) }));
  return { rec, b, queue };
}

describe("store: 'zset'", () => {
  it('makes an id ready at now + delayMs; the job waits delayed instead of polling', async () => {
    const { rec, b, queue } = setup();
    b.createWorker();
    const pushedAt = Date.now();
    await b.performBatchLater(['later'], { key: 'k', delayMs: 400 });
    await waitFor(async () => (await queue.getDelayedCount()) === 1, { what: 'a delayed job' });
    expect(rec.calls).toHaveLength(0);
    await waitFor(() => rec.calls.length === 1);
    expect(rec.calls[0]!.at - pushedAt).toBeGreaterThanOrEqual(400 - 5); // Redis and Node share this clock
  });

  it('re-adding an id moves it (debounce): processed once, at the later time', async () => {
    const { rec, b } = setup();
    b.createWorker();
    await b.performBatchLater(['x', 'y'], { key: 'k', delayMs: 200 });
    await new Promise((r) => setTimeout(r, 100));
    const secondPush = Date.now();
    await b.performBatchLater(['x'], { key: 'k', delayMs: 500 });
    await waitFor(() => rec.all.includes('x'));
    expect(rec.all.filter((id) => id === 'x')).toHaveLength(1);
    expect(rec.calls.find((c) => c.ids.includes('x'))!.at - secondPush).toBeGreaterThanOrEqual(500 - 5);
    // 'y' kept its own, earlier time.
    expect(rec.calls[0]!.ids).toEqual(['y']);
  });

  it('an earlier id brings a delayed job forward', async () => {
    const { rec, b } = setup();
    b.createWorker();
    await b.performBatchLater(['far'], { key: 'k', delayMs: 60_000 });
    await b.performBatchLater(['now'], { key: 'k' });
    await waitFor(() => rec.all.includes('now'), { timeoutMs: 5_000 });
    expect(rec.all).toEqual(['now']);
    expect(await b.backlog('k')).toEqual({ pending: 1, inFlight: 0 });
  });

  it('claims ready ids in time order', async () => {
    const { rec, b } = setup();
    // Pushed in reverse, far enough apart in time that push latency cannot reorder them.
    await b.performBatchLater(['c'], { key: 'k', delayMs: 3000 });
    await b.performBatchLater(['b'], { key: 'k', delayMs: 2000 });
    await b.performBatchLater(['a'], { key: 'k', delayMs: 1000 });
    b.createWorker();
    await waitFor(() => rec.all.length === 3);
    expect(rec.all).toEqual(['a', 'b', 'c']);
    expect(rec.calls).toHaveLength(3); // each woke the job at its own time
  });
});
