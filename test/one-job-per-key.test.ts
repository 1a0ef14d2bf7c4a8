import { describe, expect, it } from 'vitest';
import { JOB_NAME } from '../src';
import { queueOf, range, testBatcher, waitFor } from './helpers/redis';
import { sleep } from './helpers/time';

describe('one job per key', () => {
  // A key has at most one job waiting. Beside it, for a moment, jobs that end at once: the job of
  // a run that has handed the key on, or that found another run holding the key (a push after a
  // run's release adds the key's next job at once, or the run's hand-on does;
  // docs/contributing/internals.md, steps 1, 2 and 6), never two runs. A run that moved its own
  // job back to the queue after its release raced such a push: the key had two jobs waiting.
  it('never has two jobs for a key waiting, nor two slices of a key at once, under concurrent pushes', async () => {
    const active = new Map<string, number>();
    let overlaps = 0;
    const seen: string[] = [];
    const b = testBatcher({
      sliceSize: 5,
      maxRuntimeMs: 20,
      async eachIteration(ids, ctx) {
        const n = (active.get(ctx.key) ?? 0) + 1;
        active.set(ctx.key, n);
        if (n > 1) overlaps++;
        await sleep(2);
        seen.push(...ids);
        active.set(ctx.key, n - 1);
      },
    });
    const queue = queueOf(b);
    b.createWorker({ concurrency: 8 });

    let maxWaitingPerKey = 0;
    let sampling = true;
    // Each count from one getJobs: BullMQ reads the lists of its states in one script, so a job is
    // in one of them, and a job that completes after the read is not taken for a waiting one.
    const mostWaitingPerKey = async () => {
      const perKey = new Map<string, number>();
      for (const job of await queue.getJobs(['waiting', 'delayed', 'prioritized'])) {
        if (job?.name === JOB_NAME) perKey.set(job.data.key, (perKey.get(job.data.key) ?? 0) + 1);
      }
      return Math.max(0, ...perKey.values());
    };
    const sampler = (async () => {
      while (sampling) {
        maxWaitingPerKey = Math.max(maxWaitingPerKey, await mostWaitingPerKey());
        await sleep(1);
      }
    })();

    // Pushes all through the drain, so that some land just after a run's release.
    const keys = ['k1', 'k2', 'k3'];
    await Promise.all(
      Array.from({ length: 150 }, async (_, i) => {
        await sleep(i);
        await b.performBatchLater(range(8, `${i}-`), { key: keys[i % 3]! });
      }),
    );
    await waitFor(() => seen.length === 150 * 8, { what: 'all ids' });
    sampling = false;
    await sampler;

    expect(overlaps).toBe(0);
    expect(maxWaitingPerKey).toBe(1);
    expect(new Set(seen).size).toBe(1200);
  });
});
