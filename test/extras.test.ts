import { describe, expect, it } from 'vitest';
import { Keyspace } from '../src/storage/keys';
import type { Batcher, IterationContext } from '../src';
import { redisClient, testBatcher, uniqueName, waitFor } from './helpers/redis';

/**
 * The extras mark (keys.ts `extras`, includes/extras.lua): the claims and pushes of a key without
 * it read none of its uncommon keys, so every call that writes one must set it first. Each feature
 * here writes one; its own tests (pause, tickets, data, failures, flow control) show the feature
 * still works, which it could not if its write left the mark unset. These show the mark itself:
 * set by the write, and dropped by the run's last claim once nothing it stands for is left.
 */
describe("a key's extras mark", () => {
  function setup(eachIteration: (ids: string[], ctx: IterationContext) => void | Promise<void>, concurrencyPerKey = 1) {
    const redis = redisClient();
    const name = uniqueName();
    const seen: string[] = [];
    const b: Batcher = testBatcher({
      name,
      sliceSize: concurrencyPerKey > 1 ? 1 : 10,
      concurrencyPerKey,
      backoff: { type: 'fixed', delayMs: 10 },
      eachIteration: async (ids, ctx) => {
        await eachIteration(ids, ctx);
        seen.push(...ids);
      },
    });
    const names = new Keyspace('bull', name).forKey('k');
    const marked = async () => (await redis.exists(names.extras)) === 1;
    return { b, seen, names, marked, redis };
  }

  it('is never set for a key that uses none of them', async () => {
    const { b, seen, names, marked, redis } = setup(() => undefined);
    await b.performBatchLater(['a', 'b'], { key: 'k' });
    expect(await marked()).toBe(false);
    b.createWorker();
    await waitFor(async () => seen.length === 2 && (await redis.exists(names.lock)) === 0, { what: 'the run to end' });
    expect(await marked()).toBe(false);
  });

  it.each([
    ['a push with data', (b: Batcher) => b.performBatchLater([{ id: 'a', data: { v: 1 } }], { key: 'k' })],
    ['a tracked push', (b: Batcher) => b.performBatchLater(['a'], { key: 'k', track: true })],
  ] as const)('is set by %s, and dropped by the last claim of the run that settles it', async (_what, push) => {
    const { b, seen, names, marked, redis } = setup(() => undefined);
    await push(b);
    expect(await marked()).toBe(true);
    b.createWorker();
    await waitFor(async () => seen.length === 1 && (await redis.exists(names.lock)) === 0, { what: 'the run to end' });
    expect(await marked()).toBe(false);
  });

  it('is set by a pause, and dropped once the key, resumed, has run', async () => {
    const { b, seen, names, marked, redis } = setup(() => undefined);
    await b.pause('k');
    expect(await marked()).toBe(true);
    await b.performBatchLater(['a'], { key: 'k' });
    b.createWorker();
    await b.resume('k');
    await waitFor(async () => seen.length === 1 && (await redis.exists(names.lock)) === 0, { what: 'the run to end' });
    expect(await marked()).toBe(false);
  });

  it('is set by a failed slice, and dropped once its retry succeeded', async () => {
    let failures = 0;
    const { b, seen, names, marked, redis } = setup(() => {
      if (failures++ === 0) throw new Error('once');
    });
    await b.performBatchLater(['a'], { key: 'k' });
    b.createWorker();
    await waitFor(() => failures === 1, { what: 'the first attempt' });
    await waitFor(async () => seen.length === 1 && (await redis.exists(names.lock)) === 0, { what: 'the retry and the end of its run' });
    expect(failures).toBe(2);
    expect(await marked()).toBe(false);
  });

  it("is set by a handler's retryAfter, kept while its hold lives, and dropped once a slice succeeds after it", async () => {
    let asked = false;
    const { b, seen, names, marked, redis } = setup((_ids, ctx) => {
      if (!asked) {
        asked = true;
        ctx.retryAfter(200);
      }
    });
    await b.performBatchLater(['a'], { key: 'k' });
    b.createWorker();
    await waitFor(async () => (await redis.exists(names.hold)) === 1, { what: 'the hold' });
    expect(await marked()).toBe(true);
    await waitFor(async () => seen.length === 1 && (await redis.exists(names.lock)) === 0, { what: 'the slice after the hold' });
    // The streak ended with the slice that succeeded; the hold had ended before it ran.
    expect(await redis.exists(names.hold, names.retryAfterStreak)).toBe(0);
    expect(await marked()).toBe(false);
  });

  it('is set by a run with lanes, and dropped by its release once every lane is settled', async () => {
    let sawMark = false;
    const setupResult = setup(async () => {
      sawMark ||= (await setupResult.redis.exists(setupResult.names.extras)) === 1;
    }, 2);
    const { b, seen, names, marked, redis } = setupResult;
    await b.performBatchLater(['a', 'b', 'c', 'd'], { key: 'k' });
    b.createWorker();
    await waitFor(async () => seen.length === 4 && (await redis.exists(names.lock)) === 0, { what: 'the run to end' });
    expect(sawMark).toBe(true);
    expect(await redis.exists(names.lanes)).toBe(0);
    expect(await marked()).toBe(false);
  });
});
