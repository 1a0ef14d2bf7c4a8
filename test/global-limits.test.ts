import type { ChildProcess } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import { Gate } from './helpers/gate';
import { startWorkerProcess, stopProcess } from './helpers/processes';
import {
  keyspaceOf,
  onCluster,
  queueOf,
  range,
  redisClient,
  redisUrl,
  testBatcher,
  testConnection,
  track,
  uniqueName,
  waitFor,
} from './helpers/redis';
import { keysRefusedByTheWindow } from './helpers/limits';
import { busiestWindow, sleep } from './helpers/time';
import { batchByKey, InvalidOptionError, RateLimitedError, type Batcher, type BatchByKeyOptions } from '../src';

/** Starts `n` worker processes of batcher `name` (see test/fixtures/worker-process.ts). */
async function workers(
  n: number,
  name: string,
  options: Partial<BatchByKeyOptions>,
  extra: { sliceDelayMs?: number; mode?: 'hang'; worker?: Record<string, unknown> } = {},
): Promise<ChildProcess[]> {
  return Promise.all(
    range(n).map(() =>
      startWorkerProcess({
        redisUrl: redisUrl(),
        name,
        options,
        worker: { concurrency: 4, ...extra.worker },
        ...(extra.sliceDelayMs !== undefined && { sliceDelayMs: extra.sliceDelayMs }),
        ...(extra.mode && { mode: extra.mode }),
      }),
    ),
  );
}

/** The fixture's `startMs count key` per slice begun, in order of start. */
async function slicesOf(name: string): Promise<{ at: number; count: number; key: string }[]> {
  const rows = await redisClient().lrange(`${name}:slices`, 0, -1);
  return rows
    .map((row) => row.split(' '))
    .map(([at, count, key]) => ({ at: Number(at), count: Number(count), key: key! }))
    .sort((a, b) => a.at - b.at);
}

/** Pushes `perKey` ids to each of keys k0…k(keys-1), ids `${k}-${i}`. */
async function pushKeys(b: Batcher, keys: number, perKey: number): Promise<void> {
  await Promise.all(
    range(keys).map((k) =>
      b.performBatchLater(
        range(perKey).map((i) => `${k}-${i}`),
        { key: `k${k}` },
      ),
    ),
  );
}

/** A handler of 5 ms slices that records the ids done and the most slices it saw running at once. */
function meter(): { handler: (ids: readonly string[]) => Promise<void>; done: string[]; most: () => number } {
  let running = 0;
  let most = 0;
  const done: string[] = [];
  const handler = async (ids: readonly string[]) => {
    most = Math.max(most, ++running);
    await sleep(5);
    running--;
    done.push(...ids);
  };
  return { handler, done, most: () => most };
}

describe('globalConcurrency', () => {
  it('never runs more than N slices at once across keys, and processes every id', async () => {
    const { handler, done, most } = meter();
    const b = testBatcher({ sliceSize: 5, globalConcurrency: 2, eachIteration: handler });
    b.createWorker({ concurrency: 8 });
    await pushKeys(b, 10, 20);
    await waitFor(() => done.length === 200, { what: 'all 200 ids', timeoutMs: 30_000 });
    expect(most()).toBe(2);
  });
  it('a config record lost with Redis (a restart without persistence, a failover) does not lift the cap', async () => {
    const { handler, done, most } = meter();
    const b = testBatcher({
      sliceSize: 1,
      globalConcurrency: 1,
      eachIteration: async (ids) => {
        await sleep(60);
        await handler(ids);
      },
    });
    b.createWorker({ concurrency: 8 });
    await b.performBatchLater(['first'], { key: 'first' });
    await waitFor(() => done.length === 1, { what: 'the first run, which hears the cap' });
    await redisClient().del(keyspaceOf(b).config);
    // Slices for over 2 s under the cap: past the workers' once-a-second read of the limits.
    await pushKeys(b, 8, 5);
    await waitFor(() => done.length === 41, { what: 'all 41 ids', timeoutMs: 30_000 });
    expect(most()).toBe(1);
  });

  it('a slice longer than a lease keeps its place: its worker renews the lease', async () => {
    const { handler, done, most } = meter();
    const b = testBatcher({
      lockTtlMs: 1000,
      globalConcurrency: 1,
      eachIteration: async (ids, ctx) => {
        if (ctx.key === 'long') await sleep(2500);
        await handler(ids);
      },
    });
    b.createWorker({ concurrency: 4 });
    await b.performBatchLater(['1'], { key: 'long' });
    await waitFor(async () => (await b.stats()).limits.concurrency?.running === 1, { what: 'the long slice to take the place' });
    await b.performBatchLater(['2'], { key: 'short' });
    await waitFor(() => done.length === 2, { what: 'both keys', timeoutMs: 30_000 });
    // The long slice was first, so the short key waited for it whole, past two lease lengths.
    expect(done).toEqual(['1', '2']);
    expect(most()).toBe(1);
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
    await pushKeys(b, 10, 15);
    await waitFor(() => slices.reduce((n, s) => n + s[1], 0) === 150, { what: 'all 150 ids', timeoutMs: 30_000 });
    // Counted at handler start, a few ms after each reservation: the window enforced keeps a margin for that.
    expect(busiestWindow(slices, 300)).toBeLessThanOrEqual(30);
  });

  it('a key refused by the window is woken when a run gives back what it reserved and did not claim', async () => {
    // A run reserves a whole slice (sliceSize, at most max) before it knows how many ids its key
    // holds: key a reserves all 100 for its 1 id. Key b, refused meanwhile, would wait for that
    // reservation to leave the 60 s window; it must run once a's run gives the 99 back.
    const gate = new Gate();
    const queue = new Set<string>();
    const b = testBatcher({
      sliceSize: 1000,
      globalRateLimit: { max: 100, durationMs: 60_000 },
      eachIteration: async (_ids, ctx) => {
        queue.add(ctx.key);
        if (ctx.key === 'a') await gate.opened;
      },
    });
    b.createWorker({ concurrency: 4 });
    await b.performBatchLater(['1'], { key: 'a' });
    await waitFor(() => queue.has('a'), { what: 'key a to run' });
    await b.performBatchLater(['2'], { key: 'b' });
    await waitFor(async () => (await queueOf(b).getDelayedCount()) === 1, { what: 'key b to be refused' });
    gate.open();
    await waitFor(() => queue.has('b'), { what: 'key b, within a fraction of the window', timeoutMs: 20_000 });
  });
});

describe('set at run time, and seen', () => {
  it('setGlobalConcurrency and setGlobalRateLimit apply to running workers and show in stats()', async () => {
    const { handler, done, most } = meter();
    const b = testBatcher({ sliceSize: 2, eachIteration: handler });
    expect((await b.stats()).limits).toEqual({ waiting: 0, heldMs: 0, waitedMs: 0, waits: 0 });
    b.createWorker({ concurrency: 6 });
    await b.setGlobalConcurrency(1);
    await b.setGlobalRateLimit({ max: 1000, durationMs: 1000 });
    await pushKeys(b, 6, 6);
    await waitFor(() => done.length === 36, { what: 'all 36 ids', timeoutMs: 30_000 });
    expect(most()).toBe(1);
    // The last run gives its place and its unused reservation back as it ends, after its handler.
    const limits = await waitFor(
      async () => {
        const read = (await b.stats()).limits;
        return read.concurrency?.running === 0 ? read : undefined;
      },
      { what: 'the last run to leave' },
    );
    expect(limits).toMatchObject({ concurrency: { limit: 1, running: 0 }, rate: { max: 1000, durationMs: 1000, used: 36 } });
    // Six keys for one place: most of them waited, and that time is counted.
    expect(limits.waits).toBeGreaterThan(0);
    expect(limits.waitedMs).toBeGreaterThan(0);
    await b.setGlobalConcurrency(null);
    await b.setGlobalRateLimit(null);
    expect((await b.stats()).limits).not.toHaveProperty('concurrency');
    expect((await b.stats()).limits).not.toHaveProperty('rate');
  });

  it('a key the rate window refused runs once the limit is turned off or raised, not when its wait ends', async () => {
    const { b, ran } = await keysRefusedByTheWindow();
    await b.setGlobalRateLimit({ max: 10, durationMs: 60_000 });
    await waitFor(() => ran.has('b') || ran.has('c'), { what: 'one of them, in the room the raise made', timeoutMs: 20_000 });
    await b.setGlobalRateLimit(null);
    await waitFor(() => ran.has('b') && ran.has('c'), { what: 'both, the limit off', timeoutMs: 20_000 });
  });

  it('the option is recorded by the first process only: a value set at run time, or turned off, stands', async () => {
    const name = uniqueName('limits-option');
    const first = testBatcher({ name, globalConcurrency: 3, eachIteration: () => {} });
    await first.performBatchLater(['1'], { key: 'a' });
    expect((await first.stats()).limits.concurrency).toEqual({ limit: 3, running: 0 });
    await first.setGlobalConcurrency(5);
    await first.setGlobalRateLimit(null);
    const later = track(
      batchByKey({
        name,
        connection: testConnection(),
        globalConcurrency: 3,
        globalRateLimit: { max: 1, durationMs: 1000 },
        eachIteration: () => {},
      }),
    );
    await later.performBatchLater(['2'], { key: 'a' });
    const { limits } = await later.stats();
    expect(limits.concurrency).toEqual({ limit: 5, running: 0 });
    expect(limits).not.toHaveProperty('rate');
  });

  it("ctx.retryAfter(ms, { scope: 'batcher' }) holds every key, not only its own", async () => {
    let askedAt = 0;
    const starts = new Map<string, number>();
    const b = testBatcher({
      eachIteration: (_ids, ctx) => {
        if (ctx.key === 'a' && askedAt === 0) {
          askedAt = Date.now();
          ctx.retryAfter(400, { scope: 'batcher' });
        }
        starts.set(ctx.key, Date.now());
      },
    });
    b.createWorker({ concurrency: 4 });
    await b.performBatchLater(['1'], { key: 'a' });
    await waitFor(() => askedAt > 0, { what: 'the 429' });
    expect((await b.stats()).limits.heldMs).toBeGreaterThan(0);
    await b.performBatchLater(['1'], { key: 'b' });
    await waitFor(() => starts.has('a') && starts.has('b'), { what: 'both keys', timeoutMs: 10_000 });
    // Timers fire a ms early at worst: the hold is timed by Redis.
    expect(starts.get('b')! - askedAt).toBeGreaterThanOrEqual(400 - 5);
    expect(starts.get('a')! - askedAt).toBeGreaterThanOrEqual(400 - 5);
  });

  it('bad limits are refused with an InvalidOptionError before anything is written', async () => {
    const base = { name: uniqueName('limits-bad'), connection: testConnection(), eachIteration: () => {} };
    expect(() => batchByKey({ ...base, globalConcurrency: 0 })).toThrow(InvalidOptionError);
    expect(() => batchByKey({ ...base, globalConcurrency: 1.5 })).toThrow(InvalidOptionError);
    expect(() => batchByKey({ ...base, globalRateLimit: { max: 0, durationMs: 1000 } })).toThrow(InvalidOptionError);
    // @ts-expect-error a BullMQ spelling
    expect(() => batchByKey({ ...base, globalRateLimit: { max: 1, duration: 1000 } })).toThrow(/durationMs/);
    const b = testBatcher({ eachIteration: () => {} });
    await expect(b.setGlobalConcurrency(-1)).rejects.toThrow(InvalidOptionError);
    // @ts-expect-error not a limit
    await expect(b.setGlobalRateLimit({ max: 5 })).rejects.toThrow(InvalidOptionError);
    expect(await redisClient().exists(keyspaceOf(b).config)).toBe(0);
    // @ts-expect-error not a scope
    expect(() => new RateLimitedError({ retryAfterMs: 1, scope: 'world' })).toThrow(InvalidOptionError);
  });
});

// The worker processes connect by URL (a standalone server).
describe.skipIf(onCluster())('batcher-wide limits across 3 worker processes', () => {
  it('50 keys: at most 200 ids in any second and at most 4 slices at once, every id once', async () => {
    const name = uniqueName('global');
    const redis = redisClient();
    const options = { sliceSize: 5, globalRateLimit: { max: 200, durationMs: 1000 }, globalConcurrency: 4 };
    const children = await workers(3, name, options, { sliceDelayMs: 10 });
    try {
      const pusher = testBatcher({ name, ...options, eachIteration: () => {} });
      await Promise.all(
        range(50).map((k) =>
          pusher.performBatchLater(
            range(10).map((i) => `${k}-${i}`),
            { key: `k${k}` },
          ),
        ),
      );
      await waitFor(async () => (await redis.llen(`${name}:processed`)) === 500, { what: 'all 500 ids', timeoutMs: 60_000 });
      const slices = await slicesOf(name);
      expect(
        busiestWindow(
          slices.map((s) => [s.at, s.count] as const),
          1000,
        ),
      ).toBeLessThanOrEqual(200);
      expect(Math.max(...(await redis.lrange(`${name}:running:seen`, 0, -1)).map(Number))).toBeLessThanOrEqual(4);
      expect((await redis.lrange(`${name}:processed`, 0, -1)).sort()).toEqual(
        range(50)
          .flatMap((k) => range(10).map((i) => `${k}-${i}`))
          .sort(),
      );
    } finally {
      await Promise.all(children.map((c) => stopProcess(c)));
    }
  });

  it("a SIGKILLed worker's places come back within the lock TTL", async () => {
    const name = uniqueName('global-kill');
    const redis = redisClient();
    const options = { sliceSize: 5, globalConcurrency: 2, lockTtlMs: 2000 };
    const stall = { lockDuration: 1000, stalledInterval: 500 };
    const [victim] = await workers(1, name, options, { mode: 'hang', worker: { ...stall, concurrency: 2 } });
    const pusher = testBatcher({ name, ...options, eachIteration: () => {} });
    await pusher.performBatchLater(
      range(5).map((i) => `a-${i}`),
      { key: 'a' },
    );
    await pusher.performBatchLater(
      range(5).map((i) => `b-${i}`),
      { key: 'b' },
    );
    // The victim holds both places, hung.
    await waitFor(async () => (await redis.llen(`${name}:started`)) === 10, { what: 'the victim to take both places' });
    const survivors = await workers(2, name, options, { worker: stall });
    try {
      await pusher.performBatchLater(
        range(5).map((i) => `c-${i}`),
        { key: 'c' },
      );
      await stopProcess(victim!, 'SIGKILL');
      await waitFor(async () => (await redis.llen(`${name}:processed`)) === 15, { what: 'every id, the victim’s too', timeoutMs: 30_000 });
      const processed = await redis.lrange(`${name}:processed`, 0, -1);
      expect(processed.sort()).toEqual(['a', 'b', 'c'].flatMap((k) => range(5).map((i) => `${k}-${i}`)).sort());
    } finally {
      await Promise.all(survivors.map((c) => stopProcess(c)));
    }
  });

  it("a light key pushed during a flood runs before the flood's running lanes start another slice", async () => {
    const name = uniqueName('global-fair');
    // One place, and long turns: without giving up its place, the flood's running lane would run
    // many more slices first. (With more places, a lane may keep its own while a place is free
    // for the light key, and run on as the light key's job is fetched.)
    const options = { sliceSize: 5, globalConcurrency: 1, maxRuntimeMs: 300 };
    const children = await workers(3, name, options, { sliceDelayMs: 20 });
    try {
      const pusher = testBatcher({ name, ...options, eachIteration: () => {} });
      await Promise.all(
        ['f1', 'f2', 'f3'].map((k) =>
          pusher.performBatchLater(
            range(2000).map((i) => `${k}-${i}`),
            { key: k },
          ),
        ),
      );
      // Every flood key has had a whole turn (at most 15 slices of 20 ms): each is heavy now.
      await waitFor(async () => (await slicesOf(name)).filter((s) => s.key === 'f3').length > 20, {
        what: 'every flood key to have had its turn',
        timeoutMs: 30_000,
      });
      const pushedAt = Date.now();
      await pusher.performBatchLater(['x'], { key: 'light' });
      await waitFor(async () => (await slicesOf(name)).some((s) => s.key === 'light'), { what: 'the light key', timeoutMs: 30_000 });
      const slices = await slicesOf(name);
      const lightAt = slices.find((s) => s.key === 'light')!.at;
      // At most the slice whose lane had passed the limits as the light key came.
      expect(slices.filter((s) => s.key !== 'light' && s.at >= pushedAt && s.at < lightAt).length).toBeLessThanOrEqual(1);
    } finally {
      await Promise.all(children.map((c) => stopProcess(c)));
    }
  });
});
