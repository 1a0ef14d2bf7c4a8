import { describe, expect, it } from 'vitest';
import { JOB_NAME } from '../src';
import { onCluster, queueOf, range, testBatcher, waitFor } from './helpers/redis';
import { sleep } from './helpers/time';

describe('one job per key', () => {
  // Where BullMQ completes a key's job with a call of its own (a Cluster, fastPath 'off'), a push
  // between the run's last claim (or its fetch) and that completion adds the key's next job at
  // once: for that moment the key has its finishing job beside its next one, never two runs
  // (docs/contributing/internals.md, step 1). With the fused completion it has one job, always.
  const fused = !onCluster() && process.env.BATCH_BY_KEY_FAST_PATH !== 'off';
  it('never has two jobs for a key waiting (one, on the fused path), nor two slices of a key at once, under concurrent pushes', async () => {
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

    let maxJobsPerKey = 0;
    let maxWaitingPerKey = 0;
    let sampling = true;
    // Each count from one getJobs: BullMQ reads the lists of its states in one script, so a job is
    // in one of them, and a job that completes after the read is not taken for a waiting one.
    const mostPerKey = async (states: ('waiting' | 'active' | 'delayed' | 'prioritized')[]) => {
      const perKey = new Map<string, number>();
      for (const job of await queue.getJobs(states)) {
        if (job?.name === JOB_NAME) perKey.set(job.data.key, (perKey.get(job.data.key) ?? 0) + 1);
      }
      return Math.max(0, ...perKey.values());
    };
    const sampler = (async () => {
      while (sampling) {
        maxJobsPerKey = Math.max(maxJobsPerKey, await mostPerKey(['waiting', 'active', 'delayed', 'prioritized']));
        maxWaitingPerKey = Math.max(maxWaitingPerKey, await mostPerKey(['waiting', 'delayed', 'prioritized']));
        await sleep(5);
      }
    })();

    const keys = ['k1', 'k2', 'k3'];
    await Promise.all(
      Array.from({ length: 60 }, async (_, i) => {
        await sleep(i % 7);
        await b.performBatchLater(range(20, `${i}-`), { key: keys[i % 3]! });
      }),
    );
    await waitFor(() => seen.length === 60 * 20, { what: 'all ids' });
    sampling = false;
    await sampler;

    expect(overlaps).toBe(0);
    expect(maxWaitingPerKey).toBe(1);
    expect(maxJobsPerKey).toBeLessThanOrEqual(fused ? 1 : 2);
    expect(new Set(seen).size).toBe(1200);
  });
});
