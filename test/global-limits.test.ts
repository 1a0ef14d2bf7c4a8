import { describe, expect, it } from 'vitest';
import { range, testBatcher, waitFor } from './helpers/redis';
import { sleep } from './helpers/time';

describe('globalConcurrency', () => {
  it('never runs more than N slices at once across keys, and processes every id', async () => {
    let running = 0;
    let most = 0;
    const done: string[] = [];
    const b = testBatcher({
      sliceSize: 5,
      globalConcurrency: 2,
      eachIteration: async (ids) => {
        most = Math.max(most, ++running);
        await sleep(5);
        running--;
        done.push(...ids);
      },
    });
    b.createWorker({ concurrency: 8 });
    await Promise.all(
      range(10).map((k) =>
        b.performBatchLater(
          range(20).map((i) => `${k}-${i}`),
          { key: `k${k}` },
        ),
      ),
    );
    await waitFor(() => done.length === 200, { what: 'all 200 ids', timeoutMs: 30_000 });
    expect(most).toBe(2);
  });
});

describe('globalRateLimit', () => {
  it('claims at most max ids in any window across keys', async () => {
    const slices: [number, number][] = [];
    const b = testBatcher({
      sliceSize: 10,
      globalRateLimit: { max: 30, durationMs: 300 },
      eachIteration: (ids) => void slices.push([Date.now(), ids.length]),
    });
    b.createWorker({ concurrency: 8 });
    await Promise.all(
      range(10).map((k) =>
        b.performBatchLater(
          range(15).map((i) => `${k}-${i}`),
          { key: `k${k}` },
        ),
      ),
    );
    await waitFor(() => slices.reduce((n, s) => n + s[1], 0) === 150, { what: 'all 150 ids', timeoutMs: 30_000 });
    const sorted = slices.sort((a, c) => a[0] - c[0]);
    let worst = 0;
    for (const [at] of sorted)
      worst = Math.max(
        worst,
        sorted.filter(([t]) => t >= at && t < at + 250).reduce((n, s) => n + s[1], 0),
      );
    expect(worst).toBeLessThanOrEqual(30);
  });
});
