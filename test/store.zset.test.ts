import { describe, expect, it } from 'vitest';
import { queueOf, Recorder, testBatcher, waitFor } from './helpers/redis';
import { sleep } from './helpers/time';

function setup() {
  const rec = new Recorder();
  const b = testBatcher({ store: 'zset', eachIteration: rec.handler });
  const queue = queueOf(b);
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
    await sleep(100);
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
    expect(await b.backlog('k')).toEqual({ pending: 1, inFlight: 0, retrying: 0 });
  });

  it('a push during a backoff runs at once; the failed slice waits out its backoff', async () => {
    const calls: { ids: string[]; at: number }[] = [];
    const b = testBatcher({
      store: 'zset',
      backoff: { type: 'fixed', delayMs: 1500 },
      eachIteration(ids) {
        calls.push({ ids: [...ids], at: Date.now() });
        if (calls.length === 1) throw new Error('first try fails');
      },
    });
    b.createWorker();
    await b.performBatchLater(['a'], { key: 'k' });
    await waitFor(() => calls.length === 1);
    await b.performBatchLater(['b'], { key: 'k' }); // ready now; only 'a' backs off
    await waitFor(() => calls.length === 3, { timeoutMs: 10_000 });
    expect(calls.map((c) => c.ids)).toEqual([['a'], ['b'], ['a']]);
    expect(calls[1]!.at - calls[0]!.at).toBeLessThan(1500);
    expect(calls[2]!.at - calls[0]!.at).toBeGreaterThanOrEqual(1500 - 20);
  });

  it('ids pushed at random moments with random delays are each processed soon after they are ready', async () => {
    const readyAt = new Map<string, number>();
    const lateness: number[] = [];
    const b = testBatcher({
      store: 'zset',
      eachIteration(ids) {
        for (const id of ids) lateness.push(Date.now() - readyAt.get(id)!);
      },
    });
    b.createWorker({ concurrency: 2 });
    await Promise.all(
      Array.from({ length: 150 }, async (_, i) => {
        await new Promise((r) => setTimeout(r, (i * 37) % 400));
        // Delays spread over 3 s, so an id held to a later id's time is seconds late: far past the
        // bound, which leaves a loaded machine a second of slack.
        const delayMs = (i * 53) % 3000;
        readyAt.set(`id-${i}`, Date.now() + delayMs);
        await b.performBatchLater([`id-${i}`], { key: `k${i % 3}`, delayMs });
      }),
    );
    await waitFor(() => lateness.length === 150, { timeoutMs: 15_000 });
    expect(Math.max(...lateness)).toBeLessThan(2000);
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
