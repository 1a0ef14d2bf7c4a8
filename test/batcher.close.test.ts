import { describe, expect, it } from 'vitest';
import { batchByKey, ClosedError, type Batcher, type Progress } from '../src';
import { startRedis } from '../tools/redis-server';
import { keyspaceOf, onCluster, parseUrl, queueOf, range, redisClient, testBatcher, uniqueName, waitFor } from './helpers/redis';

/**
 * A batcher whose worker ran a slice of `ids` (key 'k') and was closed with it under way: the
 * handler holds the slice until the close stops it, so the run ends as a shutdown, mid-key, the
 * slice handed back.
 */
async function closedMidSlice(options: { sliceSize?: number; globalConcurrency?: number }, ids: string[]): Promise<Batcher> {
  let started!: () => void;
  const running = new Promise<void>((resolve) => (started = resolve));
  const b = testBatcher({
    ...options,
    shutdownTimeoutMs: 200,
    async eachIteration(_ids, ctx) {
      started();
      await new Promise((_, reject) => ctx.signal.addEventListener('abort', () => reject(ctx.signal.reason as Error)));
    },
  });
  b.createWorker();
  await b.performBatchLater(ids, { key: 'k' });
  await running;
  await b.close();
  return b;
}

/** `X.close()` against what is under way when it begins: the calls it lets finish, and the waits it ends. */
describe('X.close() and the calls under way', () => {
  it('a pause that close() overtakes resolves, and is applied', async () => {
    for (let run = 0; run < 3; run++) {
      const b = testBatcher({ eachIteration: () => {} });
      // The batcher's first call: its scripts' library is looked up (and loaded) first, round trips a close could overtake.
      const pausing = b.pause('k', { forMs: 60_000 });
      const closing = b.close();
      await expect(pausing).resolves.toBeUndefined();
      await closing;
      expect(await redisClient().exists(keyspaceOf(b).forKey('k').paused)).toBe(1);
    }
  });

  it('a waitFor pending at close() rejects with ClosedError', async () => {
    const b = testBatcher({ eachIteration: () => {} });
    const { ticket } = await b.performBatchLater(range(2), { key: 'k', track: true });
    let read = 0;
    const onProgress = () => void read++;
    const waits = [b.waitFor(ticket, { onProgress }), b.waitFor(ticket, { pollMs: 10, onProgress })].map((w) =>
      w.catch((e: unknown) => e as Error | Progress),
    );
    // Both are waiting (neither can end before a worker runs the ids).
    await waitFor(() => read === 2, { what: 'both waits to read once' });
    await b.close();
    for (const error of await Promise.all(waits)) {
      expect(error).toBeInstanceOf(ClosedError);
      expect(error).toMatchObject({ code: 'ERR_CLOSED', message: expect.stringMatching(/closed/) });
    }
  });

  it('a run that close() stops mid-slice hands its key back: no job fails, and the next worker runs the rest', async () => {
    const ran = new Set<string>();
    const first = await closedMidSlice({ sliceSize: 5 }, range(20));
    // Its job went back (delayed or waiting for the next worker), not to failed, where only a
    // recovery sweep (recoveryIntervalMs, 60 s here) would find the key again.
    expect(await queueOf(first).getJobCounts('failed')).toEqual({ failed: 0 });
    const next = testBatcher({ name: first.name, eachIteration: (ids) => ids.forEach((id) => ran.add(id)) });
    next.createWorker();
    await waitFor(() => ran.size === 20, { timeoutMs: 20_000, what: 'the 20 ids to run on the next worker' });
  });

  it.skipIf(onCluster())(
    'a pause that close() overtakes while Redis is away rejects with ClosedError once the close stops waiting for it',
    async () => {
      const server = await startRedis();
      // No retry limit: the pause waits for Redis for ever, so only the close ends it.
      const b = batchByKey({
        name: uniqueName(),
        connection: { ...parseUrl(server.url), maxRetriesPerRequest: null },
        pushTimeoutMs: 1_000,
      });
      try {
        await b.pause('warm', { forMs: 1_000 });
        await server.stop();
        const pausing = b.pause('k', { forMs: 60_000 }).catch((e: unknown) => e);
        await b.close();
        const error = await pausing;
        expect(error).toBeInstanceOf(ClosedError);
        expect(error).toMatchObject({ code: 'ERR_CLOSED', message: expect.stringMatching(/closed/) });
      } finally {
        await b.close();
        await server.stop();
      }
    },
    30_000,
  );

  it('a run that close() stops gives its globalConcurrency place back: the next worker does not wait for the lease to lapse', async () => {
    const first = await closedMidSlice({ globalConcurrency: 1 }, ['a']);
    // Its lease would otherwise hold the one place for lockTtlMs (30 s).
    expect(await redisClient().zcard(keyspaceOf(first).limits.leases)).toBe(0);
  });
});
