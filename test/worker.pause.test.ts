import * as bullmq from 'bullmq';
import { describe, expect, it } from 'vitest';
import type { BatchByKeyOptions } from '../src';
import { onCluster, Recorder, redisClient, testBatcher, testConnection, track, waitFor } from './helpers/redis';
import { layoutOf } from './helpers/shards';

/**
 * BullMQ's ceiling on one blocking wait for its queue's marker (its `maximumBlockTimeout` on
 * Redis). A pause disconnects that wait, which BullMQ then records as "next job due at Infinity":
 * after resume() its first wait blocked this long, while a delayed job that came due during the
 * pause, whose marker the wait before the pause had taken already, sat in the delayed set.
 */
const BLOCK_CEILING_MS = 10_000;
/** How soon after resume() that job must run: a bound well under the ceiling, not a wait. */
const PROMPTLY_MS = BLOCK_CEILING_MS / 2;

/**
 * Delays longer than a run's own wake-up timer (key-run.ts PROMPT_WAKE_MS, 1 s), which would
 * promote the job itself and so add a new marker: the worker's fetch alone must find the job.
 */
const DELAY_MS = 1_500;

interface DelayedCase {
  what: string;
  options: Partial<BatchByKeyOptions>;
  push: { delayMs?: number };
}

const CASES = [
  { what: "a zset key's delayed id (delayMs)", options: { store: 'zset' }, push: { delayMs: DELAY_MS } },
  { what: 'a key waiting to fill (maxWaitMs)', options: { minSliceSize: 5, maxWaitMs: DELAY_MS }, push: {} },
] as const satisfies readonly DelayedCase[];

// On a Cluster, BullMQ's pause waits for an 'end' event of its blocking connection that ioredis
// does not send while that connection is idle (BullMQ issue #4065): pause() does not return.
describe.skipIf(onCluster())('worker.resume() after a pause', () => {
  describe.each([1, 2])('%i shard(s)', (shards) => {
    it.each(CASES)('runs $what that came due during the pause at once, not after a blocking wait', async ({ options, push }) => {
      const rec = new Recorder();
      const b = testBatcher({ ...options, shards, eachIteration: rec.handler });
      const key = 'k';
      const layout = layoutOf(b.name, shards);
      // The BullMQ queue of the key's shard.
      const queue = track(
        new bullmq.Queue(b.name, { connection: testConnection() as bullmq.ConnectionOptions, prefix: layout.prefixes[layout.of(key)] }),
      );
      const worker = b.createWorker();
      await Promise.all(worker.shardWorkers.map((w) => new Promise<void>((drained) => w.once('drained', () => drained()))));

      const pushedAt = Date.now();
      await b.performBatchLater(['1'], { key, ...push });
      const redis = redisClient();
      await waitFor(async () => (await queue.getDelayedCount()) === 1 && (await redis.exists(queue.keys.marker!)) === 0, {
        what: "the key's job delayed, and its shard's worker blocked on the queue's marker again",
      });
      await worker.pause();
      await waitFor(() => Date.now() > pushedAt + DELAY_MS, { what: 'the delayed job to come due during the pause' });
      expect(rec.calls, 'nothing ran while paused').toEqual([]);

      const resumedAt = Date.now();
      await worker.resume();
      await waitFor(() => rec.calls.length > 0, {
        timeoutMs: PROMPTLY_MS,
        what: `the job that came due during the pause, within ${PROMPTLY_MS} ms of resume() (BullMQ's blocking wait is up to ${BLOCK_CEILING_MS} ms)`,
      });
      expect(rec.idsOf(key)).toEqual(['1']);
      expect(rec.calls[0]!.at - resumedAt).toBeLessThan(PROMPTLY_MS);
    });
  });
});

describe('worker.pause() that close() overtakes', () => {
  it.each([
    ['worker.close()', 'worker'],
    ['X.close()', 'batcher'],
  ] as const)('resolves once %s ends, with a slice running: the worker takes no more jobs either way', async (_what, closer) => {
    let started!: () => void;
    const running = new Promise<void>((resolve) => (started = resolve));
    const b = testBatcher({
      shutdownTimeoutMs: 200,
      async eachIteration(_ids, ctx) {
        started();
        await new Promise((_, reject) => ctx.signal.addEventListener('abort', () => reject(ctx.signal.reason as Error)));
      },
    });
    const worker = b.createWorker();
    await b.performBatchLater(['1'], { key: 'k' });
    await running;
    // Waits for the running job, then reconnects the blocking connection the close has ended.
    const pausing = worker.pause();
    await (closer === 'worker' ? worker.close() : b.close());
    await expect(pausing).resolves.toBeUndefined();
  });
});
