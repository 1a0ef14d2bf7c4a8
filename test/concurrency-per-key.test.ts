import { describe, expect, it } from 'vitest';
import { keyspaceOf, range, redisClient, testBatcher, waitFor } from './helpers/redis';
import { sleep } from './helpers/time';

describe('concurrencyPerKey', () => {
  it.each(['list', 'set'] as const)(
    '%s: runs 4 slices of one key at once, each id exactly once, never one id in two running slices',
    async (store) => {
      const running = new Set<string>();
      const counts = new Map<string, number>();
      let overlaps = 0;
      let most = 0;
      let slices = 0;
      const b = testBatcher({
        store,
        sliceSize: 5,
        concurrencyPerKey: 4,
        async eachIteration(ids) {
          for (const id of ids) {
            if (running.has(id)) overlaps++;
            running.add(id);
          }
          slices++;
          most = Math.max(most, slices);
          await sleep(10);
          slices--;
          for (const id of ids) {
            running.delete(id);
            counts.set(id, (counts.get(id) ?? 0) + 1);
          }
        },
      });
      b.createWorker({ concurrency: 1 });
      await b.performBatchLater(range(200), { key: 'k' });
      await waitFor(() => counts.size === 200, { what: 'every id' });
      expect(most).toBe(4);
      expect(overlaps).toBe(0);
      expect([...counts.values()].every((n) => n === 1)).toBe(true);
      expect(await b.backlog('k')).toEqual({ pending: 0, inFlight: 0, retrying: 0 });
    },
  );

  it('stops every lane when the budget is spent, and the next run goes on where they stopped', async () => {
    const seen: string[] = [];
    const reasons: string[] = [];
    const b = testBatcher({
      sliceSize: 2,
      concurrencyPerKey: 3,
      maxRuntimeMs: 20,
      async eachIteration(ids) {
        await sleep(5);
        seen.push(...ids);
      },
    });
    b.on('interrupted', (e) => reasons.push(e.reason));
    b.createWorker();
    const { ticket } = await b.performBatchLater(range(120), { key: 'k', track: true });
    expect(await b.waitFor(ticket, { timeoutMs: 30_000 })).toMatchObject({ done: 120, pending: 0 });
    expect(reasons.length).toBeGreaterThan(1);
    expect([...seen].sort()).toEqual(range(120).sort());
  });

  it('failed slices in one lane are retried while the other lanes go on', async () => {
    const seen = new Set<string>();
    let failures = 0;
    const b = testBatcher({
      sliceSize: 1,
      concurrencyPerKey: 2,
      backoff: { type: 'fixed', delayMs: 50 },
      eachIteration(ids) {
        if (ids[0] === '3' && failures++ < 2) throw new Error('flaky');
        seen.add(ids[0]!);
      },
    });
    b.createWorker();
    const { ticket } = await b.performBatchLater(range(20), { key: 'k', track: true });
    expect(await b.waitFor(ticket)).toMatchObject({ done: 20, failed: 0 });
    expect(seen.size).toBe(20);
    expect(failures).toBe(3);
  });
});

describe('concurrencyPerKey: one lane in trouble', () => {
  it('ids a crashed run left only in a lane above 0 count in backlog() and are recovered, not forgotten', async () => {
    const seen: string[] = [];
    const b = testBatcher({ recoveryIntervalMs: 100_000, eachIteration: (ids) => void seen.push(...ids) });
    // What a run with 2 lanes leaves when it dies after lane 0 drained: ids only in lane 1.
    await redisClient().rpush(`${keyspaceOf(b).forKey('k').inFlight}:1`, 'x', 'y');
    await redisClient().zadd(keyspaceOf(b).index, 0, 'k');
    expect(await b.backlog('k')).toEqual({ pending: 0, inFlight: 2, retrying: 0 });
    expect(await b.recover()).toBe(1);
    b.createWorker();
    await waitFor(() => seen.length === 2);
    expect(seen).toEqual(['x', 'y']);
  });

  it('a slice timeout in one lane does not fail the slices of the others', async () => {
    const done: string[] = [];
    const b = testBatcher({
      sliceSize: 1,
      concurrencyPerKey: 2,
      sliceTimeoutMs: 200,
      attempts: 1,
      isolateFailures: false,
      async eachIteration(ids, ctx) {
        if (ids[0] === 'slow') await new Promise(() => {}); // ignores its signal
        // 50 ms slices that honour their signal: one of them is running when 'slow' times out.
        await new Promise<void>((resolve, reject) => {
          const timer = setTimeout(resolve, 50);
          ctx.signal.addEventListener('abort', () => {
            clearTimeout(timer);
            reject(ctx.signal.reason as Error);
          });
        });
        done.push(ids[0]!);
      },
    });
    b.createWorker();
    await b.performBatchLater(['slow', ...range(10, 'good-')], { key: 'k' });
    await waitFor(async () => (await b.deadLetters.count()) >= 1 && done.length + (await b.deadLetters.count()) === 11, {
      what: 'every id settled',
    });
    expect([...done].sort()).toEqual(range(10, 'good-').sort());
    expect((await b.deadLetters.list()).letters.map((l) => [l.id, l.error.name])).toEqual([['slow', 'SliceTimeoutError']]);
  });

  it('Redis trouble in one lane stops the run only after the other lanes finish their slices', async () => {
    const redis = redisClient();
    const lockHeldAtEnd: (string | null)[] = [];
    const warned: string[] = [];
    const b = testBatcher({
      sliceSize: 1,
      concurrencyPerKey: 2,
      logger: { warn: (message) => void warned.push(message) },
      async eachIteration(ids) {
        const names = keyspaceOf(b).forKey('k');
        if (ids[0] === 'breaker') {
          // The next claim of this lane fails: the pending list is suddenly a hash.
          await redis.del(names.pending);
          await redis.hset(names.pending, 'x', '1');
          return;
        }
        await sleep(300); // the other lane's work
        lockHeldAtEnd.push(await redis.get(names.lock));
      },
    });
    b.createWorker();
    await b.performBatchLater(['slow', 'breaker'], { key: 'k' });
    await waitFor(() => warned.includes('batch-by-key: run interrupted by an error; retrying the key') && lockHeldAtEnd.length > 0);
    await redis.del(keyspaceOf(b).forKey('k').pending);
    expect(lockHeldAtEnd[0]).not.toBeNull();
  });
});

describe('slice:done waitedMs', () => {
  it("is each lane's own slice's wait from push to claim", async () => {
    const waited: { ids: readonly string[]; waitedMs?: number }[] = [];
    const b = testBatcher({
      sliceSize: 2,
      concurrencyPerKey: 2,
      eachIteration: () => sleep(150),
    });
    b.on('slice:done', ({ ids, waitedMs }) => void waited.push({ ids, waitedMs }));
    await b.performBatchLater(range(8), { key: 'k' });
    b.createWorker();
    await waitFor(() => waited.length === 4);
    // Pushed at once: the first two slices start at once, the next two only after one 150 ms
    // slice has ended, so each waited at least that much longer than the first two (however
    // long a loaded machine takes to start the first ones).
    const byFirstId = new Map(waited.map((w) => [w.ids[0], w.waitedMs!]));
    const firstTwo = Math.min(byFirstId.get('0')!, byFirstId.get('2')!);
    expect(byFirstId.get('4')).toBeGreaterThanOrEqual(firstTwo + 140);
    expect(byFirstId.get('6')).toBeGreaterThanOrEqual(firstTwo + 140);
    expect(Math.abs(byFirstId.get('0')! - byFirstId.get('2')!)).toBeLessThan(140);
  });
});
