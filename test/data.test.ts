import { describe, expect, it } from 'vitest';
import { batchByKey, InvalidOptionError, PermanentError, type IterationContext } from '../src';
import { Gate } from './helpers/gate';
import { testBatcher, testConnection, track, uniqueName, waitFor } from './helpers/redis';

type Doc = { v: number; note?: string };

/** What each handler call saw: its ids and, per id, ctx.payloads(id). */
function recorder() {
  const calls: { ids: string[]; payloads: Record<string, Doc[]>; attempt: number }[] = [];
  const handler = (ids: string[], ctx: IterationContext<Doc>) => {
    calls.push({ ids: [...ids], payloads: Object.fromEntries(ids.map((id) => [id, ctx.payloads(id)])), attempt: ctx.attempt });
  };
  return { calls, handler, seen: () => calls.flatMap((c) => c.ids) };
}

describe('data per id', () => {
  it('list: each push of an id is its own entry with its own data; ids pushed without have none', async () => {
    const rec = recorder();
    const b = testBatcher({ sliceSize: 1, eachIteration: rec.handler });
    await b.performBatchLater([{ id: 'a', data: { v: 1 } }, 'b', { id: 'a', data: { v: 2 } }, { id: 'c', data: [] as unknown as Doc }], {
      key: 'k',
    }); // [] stays [] (Lua's cjson would make it {})
    b.createWorker();
    await waitFor(() => rec.calls.length === 4, { what: 'four slices' });
    expect(rec.calls.map((c) => c.payloads)).toEqual([{ a: [{ v: 1 }] }, { b: [] }, { a: [{ v: 2 }] }, { c: [[]] }]);
  });

  it('hands ctx.data (the latest) and ctx.payloads to the handler, typed', async () => {
    const seen: (Doc | undefined)[] = [];
    const b = track(
      batchByKey<Doc>({
        name: uniqueName(),
        connection: testConnection(),
        store: 'set',
        merge: 'all',
        eachIteration: (ids, ctx) => void seen.push(...ids.map((id) => ctx.data(id))),
      }),
    );
    await b.performBatchLater([{ id: 'a', data: { v: 1 } }], { key: 'k' });
    await b.performBatchLater([{ id: 'a', data: { v: 2, note: 'big: 12345678901234567890' } }], { key: 'k' });
    b.createWorker();
    await waitFor(() => seen.length === 1, { what: 'the slice' });
    expect(seen).toEqual([{ v: 2, note: 'big: 12345678901234567890' }]);
  });

  it.each([
    ['replace', [{ v: 3 }]],
    ['keep', [{ v: 1 }]],
    ['all', [{ v: 1 }, { v: 2 }, { v: 3 }]],
  ] as const)('set, merge %s: a push of a pending id merges its data', async (merge, expected) => {
    const rec = recorder();
    const b = testBatcher<Doc>({ store: 'set', merge, eachIteration: rec.handler });
    for (const v of [1, 2, 1, 3]) await b.performBatchLater([{ id: 'x', data: { v } }], { key: 'k' });
    b.createWorker();
    await waitFor(() => rec.calls.length === 1, { what: 'the slice' });
    expect(rec.calls[0]!.payloads).toEqual({ x: expected });
  });

  it("merge 'all' under concurrent pushes from two connections keeps every distinct payload once, each pusher's in its order", async () => {
    const name = uniqueName();
    const pushers = [0, 1].map(() => track(batchByKey<Doc>({ name, connection: testConnection(), store: 'zset', merge: 'all' })));
    await Promise.all(
      pushers.map(async (p, n) => {
        for (let i = 0; i < 20; i++) await p.performBatchLater([{ id: 'x', data: { v: n * 100 + (i % 10) } }], { key: 'k' });
      }),
    );
    const rec = recorder();
    testBatcher<Doc>({ name, store: 'zset', merge: 'all', eachIteration: rec.handler }).createWorker();
    await waitFor(() => rec.calls.length === 1, { what: 'the slice' });
    const values = rec.calls[0]!.payloads.x!.map((d) => d.v);
    expect([...values].sort((a, b) => a - b)).toEqual([0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 100, 101, 102, 103, 104, 105, 106, 107, 108, 109]);
    for (const n of [0, 1])
      expect(values.filter((v) => Math.floor(v / 100) === n)).toEqual(Array.from({ length: 10 }, (_, i) => n * 100 + i));
  });

  it('survives a retry, the split, the dead letter and its requeue', async () => {
    const rec = recorder();
    let broken = true;
    const b = testBatcher({
      sliceSize: 4,
      attempts: 2,
      backoff: { type: 'fixed', delayMs: 0 },
      eachIteration: (ids: string[], ctx: IterationContext<Doc>) => {
        rec.handler(ids, ctx);
        if (broken && ids.includes('bad')) throw new Error('boom');
      },
    });
    const items = ['a', 'bad', 'c', 'd'].map((id, v) => ({ id, data: { v } }));
    await b.performBatchLater(items, { key: 'k' });
    b.createWorker();
    await waitFor(async () => (await b.deadLetters.count()) === 1, { what: 'the dead letter' });
    // Every run of every id saw its own data: two whole attempts, then the halves, then 'bad' alone.
    for (const call of rec.calls) for (const id of call.ids) expect(call.payloads[id]).toEqual([{ v: ['a', 'bad', 'c', 'd'].indexOf(id) }]);
    expect(rec.seen().filter((id) => id === 'bad')).toHaveLength(2 + 2);
    const [letter] = (await b.deadLetters.list()).letters;
    expect(letter).toMatchObject({ id: 'bad', data: { v: 1 }, payloads: [{ v: 1 }] });

    broken = false;
    const before = rec.calls.length;
    expect(await b.deadLetters.requeue()).toBe(1);
    await waitFor(() => rec.calls.length > before, { what: 'the requeued id' });
    expect(rec.calls.at(-1)!.payloads).toEqual({ bad: [{ v: 1 }] });
  });

  it.each(['list', 'set', 'zset'] as const)(
    '%s: a retry keeps its own data when the id is pushed again, with other data, during its backoff',
    async (store) => {
      const rec = recorder();
      let failed = false;
      const b = testBatcher<Doc>({
        store,
        // Long enough that the push of B runs before the retry on a loaded machine (400 ms was
        // not, once, in CI: the retry came first).
        backoff: { type: 'fixed', delayMs: 2_000 },
        eachIteration: (ids: string[], ctx: IterationContext<Doc>) => {
          rec.handler(ids, ctx);
          if (!failed) {
            failed = true;
            throw new Error('the upstream is down, once');
          }
        },
      });
      await b.performBatchLater([{ id: 'user-1', data: { v: 1, note: 'A' } }], { key: 'k' });
      b.createWorker();
      await waitFor(async () => (await b.backlog('k')).retrying === 1, { what: 'the failed run' });
      await b.performBatchLater([{ id: 'user-1', data: { v: 2, note: 'B' } }], { key: 'k' });
      await waitFor(() => rec.calls.length === 3, { what: 'the new push and the retry' });
      // The push of B runs with B's data alone, and the retry with A's. B runs first (the retry
      // backs off), but once in CI under load it ran after the retry (CHANGELOG.md, known
      // issues): what this test holds is the data, so the order is not asserted.
      const byAttempt = (c: (typeof rec.calls)[number]) => c.attempt * 10 + (c.payloads['user-1']?.[0]?.v ?? 0);
      expect([...rec.calls].sort((x, y) => byAttempt(x) - byAttempt(y)).map((c) => [c.attempt, c.payloads['user-1']])).toEqual([
        [1, [{ v: 1, note: 'A' }]],
        [1, [{ v: 2, note: 'B' }]],
        [2, [{ v: 1, note: 'A' }]],
      ]);
      expect(await b.backlog('k')).toEqual({ pending: 0, inFlight: 0, retrying: 0 });
    },
  );

  it("a slice given back at shutdown keeps its data, and so does a PermanentError's retried rest", async () => {
    const rec = recorder();
    const gate = new Gate();
    const b = testBatcher({
      sliceSize: 3,
      eachIteration: async (ids: string[], ctx: IterationContext<Doc>) => {
        rec.handler(ids, ctx);
        if (rec.calls.length === 1) {
          await gate.opened;
          throw new Error('interrupted by the shutdown');
        }
        if (rec.calls.length === 2) throw new PermanentError('y is unknown', { ids: ['y'] });
      },
    });
    await b.performBatchLater(
      ['x', 'y', 'z'].map((id, v) => ({ id, data: { v } })),
      { key: 'k' },
    );
    const first = b.createWorker();
    await waitFor(() => rec.calls.length === 1, { what: 'the first slice' });
    const closing = first.close();
    gate.open();
    await closing;
    b.createWorker();
    await waitFor(() => rec.calls.length === 3, { what: 'the slice again, then its rest' });
    expect(rec.calls.map((c) => c.payloads)).toEqual([
      { x: [{ v: 0 }], y: [{ v: 1 }], z: [{ v: 2 }] },
      { x: [{ v: 0 }], y: [{ v: 1 }], z: [{ v: 2 }] },
      { x: [{ v: 0 }], z: [{ v: 2 }] },
    ]);
    expect((await b.deadLetters.list()).letters[0]).toMatchObject({ id: 'y', data: { v: 1 } });
  });

  it("lanes carry each slice's data", async () => {
    const rec = recorder();
    const b = testBatcher({ sliceSize: 5, concurrencyPerKey: 4, eachIteration: rec.handler });
    await b.performBatchLater(
      Array.from({ length: 100 }, (_, v) => ({ id: `i${v}`, data: { v } })),
      { key: 'k' },
    );
    b.createWorker();
    await waitFor(() => rec.seen().length === 100, { what: 'all ids' });
    for (const call of rec.calls) for (const id of call.ids) expect(call.payloads[id]).toEqual([{ v: Number(id.slice(1)) }]);
    expect(await b.backlog('k')).toEqual({ pending: 0, inFlight: 0, retrying: 0 });
  });

  it('merge with the list store is an InvalidOptionError', () => {
    expect(() => testBatcher({ merge: 'all', eachIteration: () => {} })).toThrow(InvalidOptionError);
    expect(() => testBatcher({ store: 'set', merge: 'union' as never, eachIteration: () => {} })).toThrow(
      /options.merge must be one of 'replace', 'keep', 'all', got "union"/,
    );
  });
});
