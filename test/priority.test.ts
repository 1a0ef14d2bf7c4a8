import { describe, expect, it } from 'vitest';
import { InvalidOptionError, KeyBacklogFullError, type StoreKind } from '../src';
import { Gate } from './helpers/gate';
import { keysMatching, keyspaceOf, range, Recorder, redisClient, testBatcher, waitFor } from './helpers/redis';

const STORES: StoreKind[] = ['list', 'set', 'zset'];

/** How many times each id ran. */
function counts(ids: readonly string[]): Map<string, number> {
  const seen = new Map<string, number>();
  for (const id of ids) seen.set(id, (seen.get(id) ?? 0) + 1);
  return seen;
}

describe("performBatchLater(ids, { priority: 'high' })", () => {
  for (const store of STORES) {
    it(`${store} store: an account's click pushed behind its 50,000-id backfill runs in the next slice claimed, and every id runs once`, async () => {
      const backfill = range(50_000, 'b');
      const slices: string[][] = [];
      let clickPushedAfter = -1;
      const b = testBatcher({
        store,
        sliceSize: 500,
        async eachIteration(ids) {
          slices.push([...ids]);
          // The click comes in while the backfill runs: during its third slice.
          if (slices.length === 3) {
            await b.performBatchLater(['click'], { key: 'acct', priority: 'high' });
            clickPushedAfter = slices.length;
          }
        },
      });
      await b.performBatchLater(backfill, { key: 'acct' });
      b.createWorker();
      await waitFor(() => clickPushedAfter > 0 && slices.length > clickPushedAfter, { what: 'the slice after the click' });
      expect(slices[clickPushedAfter]).toEqual(['click']);
      await waitFor(() => slices.flat().length >= backfill.length + 1, { what: 'the whole backfill', timeoutMs: 60_000 });
      const ran = counts(slices.flat());
      expect(ran.size).toBe(backfill.length + 1);
      expect([...ran.values()].every((n) => n === 1)).toBe(true);
      await waitFor(async () => (await b.backlog('acct')).pending === 0);
      // Nothing of the levels outlives the run: the key's extras are gone with its high store.
      await waitFor(async () => (await keysMatching(`*${b.name}*{acct}*`)).length === 0, { what: 'the key to be clean' });
    });
  }

  it('list store: FIFO within each level, the high level first', async () => {
    const rec = new Recorder();
    const b = testBatcher({ sliceSize: 2, eachIteration: rec.handler });
    await b.performBatchLater(['n0', 'n1', 'n2'], { key: 'k' });
    await b.performBatchLater(['h0', 'h1', 'h2'], { key: 'k', priority: 'high' });
    await b.performBatchLater(['n3'], { key: 'k', priority: 'normal' });
    await b.performBatchLater(['h3'], { key: 'k', priority: 'high' });
    b.createWorker();
    await waitFor(() => rec.all.length === 8);
    // A slice holds ids of one level: the high one until it is empty.
    expect(rec.calls.map((c) => c.ids)).toEqual([
      ['h0', 'h1'],
      ['h2', 'h3'],
      ['n0', 'n1'],
      ['n2', 'n3'],
    ]);
  });

  it('set store: every high id before any normal one; an id pushed at both levels runs once', async () => {
    const rec = new Recorder();
    const b = testBatcher({ store: 'set', sliceSize: 3, eachIteration: rec.handler });
    await b.performBatchLater(['n0', 'n1', 'n2', 'both', 'n3'], { key: 'k' });
    await b.performBatchLater(['h0', 'h1', 'both'], { key: 'k', priority: 'high' });
    await b.performBatchLater(['h2', 'h3'], { key: 'k', priority: 'high' });
    await b.performBatchLater(['h3', 'n4'], { key: 'k' });
    expect((await b.backlog('k')).pending).toBe(10); // 'both' moved up; 'h3', pushed at both levels, waits once at high
    b.createWorker();
    await waitFor(() => rec.all.length >= 10);
    await waitFor(async () => (await b.backlog('k')).pending === 0);
    const all = rec.all;
    expect(counts(all).size).toBe(10);
    expect(all).toHaveLength(10);
    expect(new Set(all.slice(0, 5))).toEqual(new Set(['h0', 'h1', 'h2', 'h3', 'both']));
  });

  it('zset store: among ready ids, the high ones first, each level in ready-time order', async () => {
    const rec = new Recorder();
    const b = testBatcher({ store: 'zset', sliceSize: 2, eachIteration: rec.handler });
    await b.performBatchLater(['n0', 'n1'], { key: 'k' });
    await b.performBatchLater(['n2'], { key: 'k' });
    await b.performBatchLater(['h0'], { key: 'k', priority: 'high' });
    await b.performBatchLater(['h1'], { key: 'k', priority: 'high' });
    // Not ready yet: the normal ids do not wait for it, and it runs when it is.
    await b.performBatchLater(['later'], { key: 'k', priority: 'high', delayMs: 400 });
    b.createWorker();
    await waitFor(() => rec.all.length === 6);
    expect(rec.calls.map((c) => c.ids)).toEqual([['h0', 'h1'], ['n0', 'n1'], ['n2'], ['later']]);
  });

  it('zset store: a high id not ready yet brings the key back in time, pushed at either level', async () => {
    const rec = new Recorder();
    const b = testBatcher({ store: 'zset', eachIteration: rec.handler });
    b.createWorker();
    const pushedAt = Date.now();
    await b.performBatchLater(['far'], { key: 'k', delayMs: 60_000 });
    await b.performBatchLater(['soon'], { key: 'k', priority: 'high', delayMs: 300 });
    // A later normal push must not move the key's job past the high id's time.
    await b.performBatchLater(['far2'], { key: 'k', delayMs: 60_000 });
    await waitFor(() => rec.all.includes('soon'), { timeoutMs: 10_000 });
    expect(rec.calls[0]!.at - pushedAt).toBeGreaterThanOrEqual(300 - 5);
    expect(rec.all).toEqual(['soon']);
  });

  it('zset store: an id pushed at both levels runs once, at the earlier of its two times, whichever level it was pushed at first', async () => {
    const rec = new Recorder();
    const b = testBatcher({ store: 'zset', eachIteration: rec.handler });
    b.createWorker();
    const pushedAt = Date.now();
    await b.performBatchLater(['up'], { key: 'k', delayMs: 300 });
    await b.performBatchLater(['up'], { key: 'k', priority: 'high', delayMs: 1500 });
    await b.performBatchLater(['down'], { key: 'k', priority: 'high', delayMs: 300 });
    await b.performBatchLater(['down'], { key: 'k', delayMs: 1500 });
    await waitFor(() => rec.all.length === 2, { timeoutMs: 10_000, what: 'both ids to run' });
    expect([...rec.all].sort()).toEqual(['down', 'up']);
    // At 300 ms, not 1,500: a generous margin for a loaded machine, well below the later time.
    for (const call of rec.calls) expect(call.at - pushedAt).toBeLessThan(1_200);
    // No copy of either id is left to run again at the later time.
    expect(await b.backlog('k')).toEqual({ pending: 0, inFlight: 0, retrying: 0 });
  });

  for (const store of ['set', 'zset'] as const) {
    it(`${store} store: an id waiting at high and pushed again at normal counts once, in backlog, stats and maxPendingPerKey`, async () => {
      const b = testBatcher({ store, maxPendingPerKey: 6, eachIteration: () => {} });
      await b.performBatchLater(['a'], { key: 'k', priority: 'high' });
      await b.performBatchLater(['a', 'b'], { key: 'k' });
      expect(await b.backlog('k')).toEqual({ pending: 2, inFlight: 0, retrying: 0 });
      expect((await b.stats()).pending).toBe(2);
      await b.performBatchLater(['c', 'd', 'e'], { key: 'k' });
      // Five distinct ids wait: a sixth fits under the limit of 6, a seventh does not.
      await b.performBatchLater(['f'], { key: 'k' });
      const err = await b.performBatchLater(['g'], { key: 'k' }).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(KeyBacklogFullError);
      expect(err).toMatchObject({ pending: 6 });
    });
  }

  it('a high id never waits to fill: a key waiting for minSliceSize runs its high ids at once, its others still wait', async () => {
    const rec = new Recorder();
    const b = testBatcher({ minSliceSize: 10, maxWaitMs: 60_000, eachIteration: rec.handler });
    b.createWorker();
    await b.performBatchLater(['n0', 'n1'], { key: 'k' });
    await b.performBatchLater(['click'], { key: 'k', priority: 'high' });
    await waitFor(() => rec.all.length === 1, { timeoutMs: 5_000, what: 'the high id to run' });
    expect(rec.all).toEqual(['click']);
    expect(await b.backlog('k')).toMatchObject({ pending: 2, inFlight: 0 });
    // The normal ids still wait to fill: the push that fills the key starts it.
    await b.performBatchLater(range(8, 'm'), { key: 'k' });
    await waitFor(() => rec.all.length === 11, { timeoutMs: 5_000, what: 'the filled key to run' });
  });

  it('tickets, data and progress work for high ids as for others', async () => {
    const seen: { ids: string[]; data: unknown }[] = [];
    const b = testBatcher<{ n: number }>({
      sliceSize: 10,
      eachIteration(ids, ctx) {
        seen.push({ ids: [...ids], data: ids.map((id) => ctx.data(id)) });
      },
    });
    const normal = await b.performBatchLater(
      range(5, 'n').map((id, n) => ({ id, data: { n } })),
      { key: 'k', track: true },
    );
    const high = await b.performBatchLater([{ id: 'h', data: { n: 99 } }], { key: 'k', track: true, priority: 'high' });
    b.createWorker();
    const done = await b.waitFor(high.ticket, { timeoutMs: 10_000 });
    expect(done).toMatchObject({ total: 1, done: 1, failed: 0 });
    expect(seen[0]).toEqual({ ids: ['h'], data: [{ n: 99 }] });
    expect(await b.waitFor(normal.ticket, { timeoutMs: 10_000 })).toMatchObject({ total: 5, done: 5, failed: 0 });
  });

  it('list store: a high push of an id also pending at normal keeps its own data and ticket, at the high level', async () => {
    const seen: { ids: string[]; data: unknown[] }[] = [];
    const started = new Gate();
    const release = new Gate();
    const b = testBatcher<{ v: string }>({
      sliceSize: 10,
      async eachIteration(ids, ctx) {
        seen.push({ ids: [...ids], data: ids.map((id) => ctx.data(id)) });
        started.open();
        await release.opened;
      },
    });
    const backfill = await b.performBatchLater(
      range(100, 'doc-').map((id) => ({ id, data: { v: 'old' } })),
      { key: 'k', track: true },
    );
    b.createWorker();
    await started.opened;
    // The click is on a document the backfill also holds, still pending at normal.
    const click = await b.performBatchLater([{ id: 'doc-57', data: { v: 'new' } }], { key: 'k', track: true, priority: 'high' });
    release.open();
    // Its ticket settles with its own slice, the next one, long before the backfill reaches doc-57.
    expect(await b.waitFor(click.ticket, { timeoutMs: 10_000 })).toMatchObject({ total: 1, done: 1 });
    expect(seen[1]).toEqual({ ids: ['doc-57'], data: [{ v: 'new' }] });
    expect(await b.waitFor(backfill.ticket, { timeoutMs: 10_000 })).toMatchObject({ total: 100, done: 100, failed: 0 });
    const backfilled = seen.slice(2).find((slice) => slice.ids.includes('doc-57'))!;
    expect(backfilled.data[backfilled.ids.indexOf('doc-57')]).toEqual({ v: 'old' });
  });

  it('ctx.fail in a high slice: the others are done, the failed id retries with its data and dies with its error; nothing is left', async () => {
    const runs: { ids: string[]; attempt: number; data: unknown }[] = [];
    const b = testBatcher<{ n: number }>({
      attempts: 2,
      backoff: { type: 'fixed', delayMs: 1 },
      eachIteration(ids, ctx) {
        runs.push({ ids: [...ids], attempt: ctx.attempt, data: ctx.data('h1') });
        if (ids.includes('h1')) ctx.fail('h1', new Error('bad h1'));
      },
    });
    await b.performBatchLater(['n0', 'n1'], { key: 'k', track: true });
    const { ticket } = await b.performBatchLater(
      ['h0', 'h1', 'h2'].map((id, n) => ({ id, data: { n } })),
      { key: 'k', track: true, priority: 'high' },
    );
    b.createWorker();
    expect(await b.waitFor(ticket, { timeoutMs: 10_000 })).toMatchObject({ total: 3, done: 2, failed: 1 });
    expect(runs[0]).toEqual({ ids: ['h0', 'h1', 'h2'], attempt: 1, data: { n: 1 } });
    expect(runs.find((r) => r.attempt === 2)).toEqual({ ids: ['h1'], attempt: 2, data: { n: 1 } });
    expect((await b.deadLetters.list()).letters.map((d) => [d.id, d.error.message])).toEqual([['h1', 'bad h1']]);
    // Only the tickets stay (readable ticketTtlMs after they settle).
    const left = async () => (await keysMatching(`*${b.name}*{k}*`)).filter((name) => !name.includes(':ticket:'));
    await waitFor(async () => (await left()).length === 0, { what: 'the key to be clean' });
  });

  it('a high slice stopped by a shutdown goes back to the high level, in front, with its data', async () => {
    const rec = new Recorder();
    const data: [string, unknown][] = [];
    const inHigh = new Gate();
    let stopping = true;
    const b = testBatcher<string>({
      sliceSize: 2,
      async eachIteration(ids, ctx) {
        if (stopping && ids[0] === 'h0') {
          inHigh.open();
          // Gives up when the worker closes: the slice is restored, not failed.
          await new Promise((_, reject) => ctx.signal.addEventListener('abort', () => reject(ctx.signal.reason as Error)));
        }
        for (const id of ids) data.push([id, ctx.data(id)]);
        rec.handler(ids, ctx);
      },
    });
    await b.performBatchLater(['n0', 'n1'], { key: 'k' });
    // h0 is pending at normal too, with other data: each level keeps its own.
    await b.performBatchLater([{ id: 'h0', data: 'normal h0' }], { key: 'k' });
    await b.performBatchLater(
      ['h0', 'h1', 'h2'].map((id) => ({ id, data: `high ${id}` })),
      { key: 'k', priority: 'high' },
    );
    const first = b.createWorker();
    await inHigh.opened;
    await first.close();
    expect(await b.backlog('k')).toEqual({ pending: 6, inFlight: 0, retrying: 0 });
    expect(await redisClient().lrange(keyspaceOf(b).forKey('k').pendingHigh, 0, -1)).toEqual(['h0', 'h1', 'h2']);
    stopping = false;
    b.createWorker();
    await waitFor(() => rec.all.length === 6);
    expect(rec.calls.map((c) => c.ids)).toEqual([['h0', 'h1'], ['h2'], ['n0', 'n1'], ['h0']]);
    expect(data).toEqual([
      ['h0', 'high h0'],
      ['h1', 'high h1'],
      ['h2', 'high h2'],
      ['n0', undefined],
      ['n1', undefined],
      ['h0', 'normal h0'],
    ]);
  });

  for (const store of ['set', 'zset'] as const) {
    it(`${store} store: a high slice given back by a shutdown, whose id was pushed at normal meanwhile, waits and runs once, at high`, async () => {
      const rec = new Recorder();
      const inHigh = new Gate();
      let stopping = true;
      const b = testBatcher({
        store,
        async eachIteration(ids, ctx) {
          if (stopping && ids[0] === 'h0') {
            inHigh.open();
            // Gives up when the worker closes: the slice is restored, not failed.
            await new Promise((_, reject) => ctx.signal.addEventListener('abort', () => reject(ctx.signal.reason as Error)));
          }
          rec.handler(ids, ctx);
        },
      });
      await b.performBatchLater(['h0'], { key: 'k', priority: 'high' });
      const first = b.createWorker();
      await inHigh.opened;
      await b.performBatchLater(['h0', 'n0'], { key: 'k' });
      await first.close();
      expect(await b.backlog('k')).toEqual({ pending: 2, inFlight: 0, retrying: 0 });
      stopping = false;
      b.createWorker();
      await waitFor(async () => rec.all.length >= 2 && (await b.backlog('k')).pending === 0, { what: 'both ids to run' });
      expect(rec.calls.map((c) => c.ids)).toEqual([['h0'], ['n0']]);
    });
  }

  it('with lanes (concurrencyPerKey 2): the high ids run before the rest, and every id runs once', async () => {
    const rec = new Recorder();
    let pushing: Promise<unknown> | undefined;
    let landedAt = -1;
    const b = testBatcher({
      concurrencyPerKey: 2,
      sliceSize: 1,
      async eachIteration(ids, ctx) {
        rec.handler(ids, ctx);
        if (pushing === undefined && rec.all.length === 3) {
          pushing = b.performBatchLater(range(4, 'h'), { key: 'k', priority: 'high' });
          await pushing;
          // Counted from the push's landing: the other lane runs on while it is under way (a
          // Cluster push is two calls), so how many normal ids it runs meanwhile is timing.
          landedAt = rec.all.length;
        }
      },
    });
    await b.performBatchLater(range(20, 'n'), { key: 'k' });
    b.createWorker();
    await waitFor(() => rec.all.length >= 24);
    await waitFor(async () => (await b.backlog('k')).pending === 0);
    expect([...counts(rec.all).values()]).toEqual(Array(24).fill(1));
    // Both lanes take from the high level once it has ids: within a lane's slice or two of the push.
    const highAt = range(4, 'h').map((id) => rec.all.indexOf(id));
    expect(Math.max(...highAt)).toBeLessThan(landedAt + 4 + 2);
  });

  it('backlog and stats count both levels', async () => {
    const b = testBatcher({ eachIteration: () => {} });
    await b.performBatchLater(['h0', 'h1'], { key: 'high-only', priority: 'high' });
    await b.performBatchLater(['n0'], { key: 'both' });
    await b.performBatchLater(['h0'], { key: 'both', priority: 'high' });
    expect(await b.backlog('high-only')).toEqual({ pending: 2, inFlight: 0, retrying: 0 });
    const stats = await b.stats();
    expect(stats.pending).toBe(4);
    expect(stats.keys).toBe(2);
    // The lag of a key whose ids all wait at the high level is theirs.
    await waitFor(async () => (await b.stats()).topKeys.find((k) => k.key === 'high-only')!.oldestPendingAgeMs > 0);
  });

  it('maxPendingPerKey counts both levels', async () => {
    const b = testBatcher({ maxPendingPerKey: 4, eachIteration: () => {} });
    await b.performBatchLater(['a', 'b', 'c'], { key: 'k' });
    await expect(b.performBatchLater(['h0', 'h1'], { key: 'k', priority: 'high' })).rejects.toThrow(KeyBacklogFullError);
    await b.performBatchLater(['h0'], { key: 'k', priority: 'high' });
    const err = await b.performBatchLater(['d'], { key: 'k' }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(KeyBacklogFullError);
    expect(err).toMatchObject({ pending: 4 });
  });

  it("validates priority before anything touches Redis: 'normal' or 'high'", async () => {
    const b = testBatcher({ eachIteration: () => {} });
    for (const priority of ['urgent', 1, null, 'HIGH']) {
      // @ts-expect-error an invalid priority, as plain JavaScript may pass
      const push = b.performBatchLater(['a'], { key: 'k', priority });
      await expect(push).rejects.toThrow(InvalidOptionError);
      await expect(push).rejects.toThrow(/options\.priority must be one of 'normal', 'high'/);
    }
    expect(await b.backlog('k')).toEqual({ pending: 0, inFlight: 0, retrying: 0 });
    await b.performBatchLater(['a'], { key: 'k', priority: 'normal' });
    expect((await b.backlog('k')).pending).toBe(1);
  });
});

/** Spins for `ms`: a slice that costs CPU. */
const busy = (ms: number) => {
  const end = performance.now() + ms;
  while (performance.now() < end);
};

describe("priority(key): a 'high' key never waits behind others for its turn", () => {
  it('its heavy first push starts before heavy newcomers queued earlier', async () => {
    const rec = new Recorder();
    const b = testBatcher({ sliceSize: 10, priority: (key) => (key === 'vip' ? 'high' : 'normal'), eachIteration: rec.handler });
    // Bigger than a slice: a normal key's job waits behind light ones (fair scheduling's level 1).
    await b.performBatchLater(range(30), { key: 'a' });
    await b.performBatchLater(range(30), { key: 'b' });
    await b.performBatchLater(range(30), { key: 'vip' });
    b.createWorker({ concurrency: 1 });
    await waitFor(() => rec.all.length === 90);
    expect([...new Set(rec.calls.map((c) => c.key))]).toEqual(['vip', 'a', 'b']);
  });

  it('it starts before every normal key waiting, light newcomers included: pushed after 1,000 light keys, it starts first', async () => {
    const rec = new Recorder();
    const b = testBatcher({
      sliceSize: 10,
      // No aging during the test: every normal key waits at the level it was pushed at.
      maxRuntimeMs: 120_000,
      priority: (key) => (key.startsWith('vip') ? 'high' : 'normal'),
      eachIteration: rec.handler,
    });
    const light = range(1_000, 'light-');
    await b.performBatchLater(range(30), { key: 'heavy' });
    for (const key of light) await b.performBatchLater(['1'], { key });
    await b.performBatchLater(['1'], { key: 'vip-light' });
    await b.performBatchLater(range(30), { key: 'vip-heavy' });
    b.createWorker({ concurrency: 1 });
    await waitFor(() => rec.all.length === 30 + light.length + 1 + 30, { timeoutMs: 120_000, what: 'every key to run' });
    const started = [...new Set(rec.calls.map((c) => c.key))];
    // First come first served among high keys, whatever their first push; then light, then heavy newcomers.
    expect(started.indexOf('vip-light')).toBe(0);
    expect(started.indexOf('vip-heavy')).toBe(1);
    expect(started.indexOf('heavy')).toBe(started.length - 1);
  });

  it('a running normal key yields to it, and it is not demoted when it uses its turn: it runs out before the normal key resumes', async () => {
    const rec = new Recorder();
    const b = testBatcher({
      sliceSize: 1,
      maxRuntimeMs: 100,
      priority: (key) => (key === 'vip' ? 'high' : 'normal'),
      eachIteration(ids, ctx) {
        busy(5);
        rec.handler(ids, ctx);
      },
    });
    await b.performBatchLater(range(200), { key: 'normal' });
    b.createWorker({ concurrency: 1 });
    await waitFor(() => rec.all.length >= 3, { what: 'the normal key to run' });
    await b.performBatchLater(range(60), { key: 'vip' });
    await waitFor(() => rec.idsOf('vip').length === 60, { what: "the vip key's ids", timeoutMs: 30_000 });
    const order = rec.calls.map((c) => c.key);
    const first = order.indexOf('vip');
    const last = order.lastIndexOf('vip');
    // Three turns or more of its budget (60 slices of 5 ms, 100 ms each), none given to the normal key between.
    expect(order.slice(first, last + 1).every((key) => key === 'vip')).toBe(true);
    await waitFor(() => rec.all.length === 260, { timeoutMs: 30_000 });
  });

  it('no key starves: a normal key still progresses while high keys with endless backlogs take every turn (aging)', async () => {
    const slices = new Map<string, number>();
    const b = testBatcher({
      sliceSize: 1,
      maxRuntimeMs: 30,
      recoveryIntervalMs: 100,
      priority: (key) => (key.startsWith('vip') ? 'high' : 'normal'),
      eachIteration(_ids, ctx) {
        busy(5);
        slices.set(ctx.key, (slices.get(ctx.key) ?? 0) + 1);
      },
    });
    b.createWorker({ concurrency: 1 });
    await b.performBatchLater(range(10_000), { key: 'normal' });
    await waitFor(() => (slices.get('normal') ?? 0) >= 3, { what: 'the normal key to start' });
    // Two high keys, each more than the test's whole run: between them they always have a level-0 job waiting.
    await b.performBatchLater(range(10_000), { key: 'vip-1' });
    await b.performBatchLater(range(10_000), { key: 'vip-2' });
    await waitFor(() => (slices.get('vip-1') ?? 0) >= 10 && (slices.get('vip-2') ?? 0) >= 10, { what: 'the high keys to run' });
    const before = slices.get('normal')!;
    // A light newcomer, which waits behind every high key, as well.
    await b.performBatchLater(['1'], { key: 'light' });
    await waitFor(() => slices.get('normal')! >= before + 10, { timeoutMs: 15_000, what: 'the normal key to progress' });
    await waitFor(() => slices.has('light'), { timeoutMs: 15_000, what: 'the light newcomer to run' });
    // The high keys were not done: the normal key's turns came from aging, not from their end.
    expect((await b.backlog('vip-1')).pending).toBeGreaterThan(0);
    expect((await b.backlog('vip-2')).pending).toBeGreaterThan(0);
  });

  it('with shards: high keys go first on each shard queue, and high ids first within their key', async () => {
    const rec = new Recorder();
    const b = testBatcher({
      shards: 2,
      sliceSize: 10,
      priority: (key) => (key.startsWith('vip') ? 'high' : 'normal'),
      eachIteration: rec.handler,
    });
    const keys = [...range(4, 'plain-'), ...range(4, 'vip-')];
    for (const key of keys) await b.performBatchLater(range(30), { key });
    for (const key of keys) await b.performBatchLater(['click'], { key, priority: 'high' });
    b.createWorker({ concurrency: 1 });
    await waitFor(() => rec.all.length === keys.length * 31);
    const started = [...new Set(rec.calls.map((c) => c.key))];
    expect(started.slice(0, 4).sort()).toEqual(range(4, 'vip-'));
    for (const key of keys) expect(rec.calls.find((c) => c.key === key)!.ids).toEqual(['click']);
  });

  it("a function that throws or returns no level counts as 'normal', with a warning; it needs scheduling 'fair'", async () => {
    const warnings: string[] = [];
    const rec = new Recorder();
    const b = testBatcher({
      sliceSize: 1,
      logger: { warn: (message) => void warnings.push(message) },
      priority: (key) => {
        if (key === 'throws') throw new Error('no tier');
        return 'urgent' as 'high';
      },
      eachIteration: rec.handler,
    });
    b.createWorker();
    await b.performBatchLater(['1', '2'], { key: 'throws' });
    await b.performBatchLater(['3', '4'], { key: 'odd' });
    await waitFor(() => rec.all.length === 4);
    expect(warnings).toContain("batch-by-key: the priority function threw; using 'normal'");
    expect(warnings).toContain("batch-by-key: the priority function returned no level; using 'normal'");
    expect(() => testBatcher({ scheduling: 'fifo', priority: () => 'high', eachIteration: () => {} })).toThrow(InvalidOptionError);
    // @ts-expect-error not a function, as plain JavaScript may pass
    expect(() => testBatcher({ priority: 'high', eachIteration: () => {} })).toThrow(/options\.priority/);
  });
});
