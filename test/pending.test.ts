import { describe, expect, it } from 'vitest';
import { InvalidKeyError, InvalidOptionError, type Batcher, type PendingOptions, type PendingPage, type StoreKind } from '../src';
import { Gate } from './helpers/gate';
import { range, testBatcher, waitFor } from './helpers/redis';

const STORES: StoreKind[] = ['list', 'set', 'zset'];
const idle = () => {};

/** Every page of a key's pending ids, each page's size checked against `limit`. */
async function everyPage(b: Batcher, key: string, options: PendingOptions = {}): Promise<{ pages: PendingPage[]; ids: string[] }> {
  const pages: PendingPage[] = [];
  let page: PendingPage | undefined;
  do {
    page = await b.pending(key, { ...options, ...page?.next });
    expect(page.ids.length).toBeLessThanOrEqual(options.limit ?? 100);
    pages.push(page);
  } while (page.next);
  return { pages, ids: pages.flatMap((p) => p.ids.map((i) => i.id)) };
}

describe('pending(key)', () => {
  it("list store: the high level first, each in FIFO order, every entry with its own push's data", async () => {
    const b = testBatcher({ eachIteration: idle });
    await b.performBatchLater([{ id: 'a', data: { n: 1 } }, 'b', { id: 'a', data: [2] }], { key: 'k' });
    await b.performBatchLater([{ id: 'h', data: 'high' }, 'g'], { key: 'k', priority: 'high' });
    const page = await b.pending('k');
    expect(page).toEqual({
      high: 2,
      normal: 3,
      ids: [
        { id: 'h', level: 'high', payloads: ['high'] },
        { id: 'g', level: 'high', payloads: [] },
        { id: 'a', level: 'normal', payloads: [{ n: 1 }] },
        { id: 'b', level: 'normal', payloads: [] },
        { id: 'a', level: 'normal', payloads: [[2]] },
      ],
    });
    // A page past the first entry of an id still gives each entry its own data.
    const second = await b.pending('k', { offset: 3, limit: 1 });
    expect(second.ids).toEqual([{ id: 'b', level: 'normal', payloads: [] }]);
    expect(second.next).toEqual({ offset: 4 });
    expect((await b.pending('k', { offset: 4 })).ids).toEqual([{ id: 'a', level: 'normal', payloads: [[2]] }]);
    expect((await b.pending('k', { level: 'normal', limit: 2 })).ids.map((i) => i.id)).toEqual(['a', 'b']);
    expect((await b.pending('k', { level: 'high' })).ids.map((i) => i.id)).toEqual(['h', 'g']);
    expect(await b.pending('nothing')).toEqual({ high: 0, normal: 0, ids: [] });
  });

  it('zset store: by ready time, ids not ready yet included with theirs, high first', async () => {
    const b = testBatcher({ store: 'zset', merge: 'all', eachIteration: idle });
    const before = Date.now();
    await b.performBatchLater([{ id: 'late', data: 1 }], { key: 'k', delayMs: 60_000 });
    await b.performBatchLater(
      [
        { id: 'soon', data: 2 },
        { id: 'soon', data: 3 },
      ],
      { key: 'k', delayMs: 1_000 },
    );
    await b.performBatchLater(['now'], { key: 'k' });
    await b.performBatchLater(['urgent'], { key: 'k', priority: 'high', delayMs: 5_000 });
    const page = await b.pending('k');
    expect(page.ids.map((i) => [i.id, i.level, i.payloads])).toEqual([
      ['urgent', 'high', []],
      ['now', 'normal', []],
      ['soon', 'normal', [2, 3]],
      ['late', 'normal', [1]],
    ]);
    const readyAt = Object.fromEntries(page.ids.map((i) => [i.id, i.readyAt! - before]));
    expect(readyAt['late']).toBeGreaterThanOrEqual(59_000);
    expect(readyAt['soon']).toBeGreaterThanOrEqual(900);
    expect(readyAt['soon']).toBeLessThan(30_000);
  });

  it("set store: each level's ids once, high first, with the merged data; offset refused", async () => {
    const b = testBatcher({ store: 'set', eachIteration: idle });
    await b.performBatchLater([{ id: 'a', data: 'x' }, 'b', 'c'], { key: 'k' });
    await b.performBatchLater(['h', 'b'], { key: 'k', priority: 'high' });
    const page = await b.pending('k');
    expect(page.high).toBe(2);
    expect(page.normal).toBe(2);
    expect(
      page.ids
        .slice(0, 2)
        .map((i) => i.id)
        .sort(),
    ).toEqual(['b', 'h']);
    expect(
      page.ids
        .slice(2)
        .map((i) => [i.id, i.level, i.payloads])
        .sort(),
    ).toEqual([
      ['a', 'normal', ['x']],
      ['c', 'normal', []],
    ]);
    const { ids } = await everyPage(b, 'k', { limit: 1 });
    expect(ids.sort()).toEqual(['a', 'b', 'c', 'h']);
    await expect(b.pending('k', { offset: 1 })).rejects.toThrow(InvalidOptionError);
  });

  for (const store of STORES) {
    it(`${store} store: pages through 100,000 ids, 1,000 at a time, each id once, in claim order`, async () => {
      const b = testBatcher({ store, eachIteration: idle });
      const all = range(100_000, 'id');
      await b.performBatchLater(all, { key: 'big' });
      const { pages, ids } = await everyPage(b, 'big', { limit: 1_000 });
      expect(pages.length).toBe(100);
      expect(pages.every((p) => p.normal === 100_000)).toBe(true);
      if (store === 'list') expect(ids).toEqual(all);
      else expect(new Set(ids).size).toBe(100_000);
      if (store === 'zset') {
        // By ready time, then (one push: one time) by id, as ZRANGE orders them and claims take them.
        const times = pages.flatMap((p) => p.ids.map((i) => i.readyAt!));
        expect(times).toEqual([...times].sort((x, y) => x - y));
      }
      expect(ids.length).toBe(100_000);
    }, 120_000);
  }

  it('refuses a bad key and bad options with typed errors', async () => {
    const b = testBatcher({ eachIteration: idle });
    await expect(b.pending('')).rejects.toThrow(InvalidKeyError);
    await expect(b.inFlight('')).rejects.toThrow(InvalidKeyError);
    await expect(b.pending('k', { limit: 1_001 })).rejects.toThrow(InvalidOptionError);
    await expect(b.pending('k', { limit: 0 })).rejects.toThrow(InvalidOptionError);
    await expect(b.pending('k', { offset: -1 })).rejects.toThrow(InvalidOptionError);
    await expect(b.pending('k', { cursor: 'normal 0 0' })).rejects.toThrow(InvalidOptionError);
    await expect(b.pending('k', { level: 'low' as 'high' })).rejects.toThrow(InvalidOptionError);
    await expect(b.pending('k', { page: 2 } as PendingOptions)).rejects.toThrow(InvalidOptionError);
    const s = testBatcher({ store: 'set', eachIteration: idle });
    await expect(s.pending('k', { cursor: 'high 0 0', level: 'normal' })).rejects.toThrow(InvalidOptionError);
    await expect(s.pending('k', { cursor: 'x' })).rejects.toThrow(InvalidOptionError);
  });
});

describe('inFlight(key)', () => {
  for (const store of STORES) {
    it(`${store} store: the slice a run holds, then a failed slice backing off`, async () => {
      const gate = new Gate();
      let runs = 0;
      const b = testBatcher({
        store,
        sliceSize: 2,
        attempts: 3,
        backoff: { type: 'fixed', delayMs: 60_000 },
        async eachIteration() {
          runs++;
          await gate.opened;
          throw new Error('upstream down');
        },
      });
      expect(await b.inFlight('k')).toEqual({ running: [], retrying: [] });
      await b.performBatchLater(['a', 'b', 'c'], { key: 'k' });
      b.createWorker();
      await waitFor(() => runs === 1, { what: 'the first slice' });
      const held = await b.inFlight('k');
      expect(held.retrying).toEqual([]);
      expect(held.running).toHaveLength(1);
      expect(held.running[0]).toMatchObject({ lane: 0, attempt: 1, high: false });
      expect(held.running[0]!.ids).toHaveLength(2);
      const page = await b.pending('k');
      expect(page.normal).toBe(1);
      expect([...held.running[0]!.ids, ...page.ids.map((i) => i.id)].sort()).toEqual(['a', 'b', 'c']);

      const failedAt = Date.now();
      gate.open();
      // The run goes on to the last id, which fails too: two slices back off, by due time.
      const { retrying } = await waitFor(
        async () => {
          const now = await b.inFlight('k');
          return now.retrying.length === 2 ? now : undefined;
        },
        { what: 'the failed slices' },
      );
      expect([...retrying[0]!.ids].sort()).toEqual([...held.running[0]!.ids].sort());
      expect(retrying[1]!.ids).toEqual(page.ids.map((i) => i.id));
      expect(retrying.map((r) => r.attempts)).toEqual([1, 1]);
      expect(retrying[0]!.dueAt - failedAt).toBeGreaterThan(50_000);
      expect(retrying[0]!.dueAt).toBeLessThanOrEqual(retrying[1]!.dueAt);
      expect(typeof retrying[0]!.sliceId).toBe('string');
    });
  }
});
