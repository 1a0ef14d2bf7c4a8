import { describe, expect, it } from 'vitest';
import type { StopReason } from '../src';
import { onCluster, range, testBatcher, waitFor } from './helpers/redis';
import { sleep } from './helpers/time';

/** A slice's simulated work. */
const SLICE_MS = 15;
/** The concurrency the churn sets, in turn: lowered and raised by up to 5 at once, down to 1. */
const LIMITS = [6, 2, 5, 1, 4, 3, 6, 1, 3, 2, 6, 2, 4, 1, 5, 3];
/** The churn's pace: each concurrency lasts 80 ms plus this many ms times its place mod 4, a few slices. */
const PACE_MS = 60;

/**
 * A `createWorker` worker's concurrency changed while it runs: a lowered one holds at each
 * running run's next slice boundary (the runs over it hand their job back before their next
 * slice), so the slices that start after a change never run more at once than the new
 * concurrency, and once the slices running at the change have ended (one slice's duration), no
 * more than that run at all.
 */
describe('concurrency changed at run time', () => {
  // On a Cluster, BullMQ's pause waits for an 'end' event of its blocking connection that ioredis
  // does not send while that connection is idle (BullMQ issue #4065): pause() does not return.
  it.skipIf(onCluster())(
    'with 16 shards, lowered, raised and paused in turn: the slices that start after a change never exceed it; nothing is lost',
    async () => {
      // What the handler sees, counted against the latest change: `epoch` numbers the changes.
      let limit = LIMITS[0]!;
      let epoch = 0;
      let sinceChange = 0;
      let running = 0;
      const over: string[] = [];
      const processed: string[] = [];
      const reasons: StopReason[] = [];
      const b = testBatcher({
        shards: 16,
        sliceSize: 5,
        async eachIteration(ids) {
          const startedIn = epoch;
          running++;
          sinceChange++;
          if (sinceChange > limit) over.push(`${sinceChange} slices at once started since the concurrency became ${limit}`);
          try {
            await sleep(SLICE_MS);
            processed.push(...ids);
          } finally {
            running--;
            if (startedIn === epoch) sinceChange--;
          }
        },
      });
      b.on('interrupted', ({ reason }) => reasons.push(reason));
      const worker = b.createWorker({ concurrency: limit });
      const keys = range(32, 'acct-');
      for (const key of keys) await b.performBatchLater(range(60, `${key}:`), { key });
      /** Slices still running when the concurrency was lowered below them: what the change had to stop. */
      let lowerings = 0;

      for (const [i, next] of LIMITS.slice(1).entries()) {
        await sleep(80 + (i % 4) * PACE_MS);
        if (i % 5 === 4) {
          await worker.pause();
          await worker.resume();
        }
        if (next < running) lowerings++;
        worker.concurrency = next;
        limit = next;
        epoch++;
        sinceChange = 0;
      }

      await waitFor(() => processed.length === keys.length * 60, { timeoutMs: 120_000, what: 'every id processed' });
      expect(over).toEqual([]);
      expect(new Set(processed).size, 'each id once').toBe(processed.length);
      // The churn did lower the concurrency below the slices running, and runs handed their keys back for it.
      expect(lowerings).toBeGreaterThan(0);
      expect(reasons).toContain('concurrency_lowered');
    },
    180_000,
  );
});
