import { describe, expect, it } from 'vitest';
import { InvalidOptionError, type Batcher, type StoreKind } from '../src';
import { resolveOptions } from '../src/options';
import { keysMatching, queueOf, range, Recorder, testBatcher, waitFor } from './helpers/redis';

/** Redis's clock and the test's are one machine's; a claim's time is whole ms. */
const CLOCK_SLACK_MS = 5;

/** Whether the key's BullMQ job waits delayed (a key waiting to fill holds no worker slot). */
async function waitsDelayed(b: Batcher, key: string): Promise<boolean> {
  return (await queueOf(b).getDelayed()).some((job) => job.data.key === key);
}

const STORES: readonly StoreKind[] = ['list', 'set', 'zset'];

describe('wait to fill (minSliceSize, maxWaitMs)', () => {
  describe.each(STORES)('store %s', (store) => {
    it('a key with fewer ids than minSliceSize runs once its oldest id has waited maxWaitMs, all of them in one slice', async () => {
      const rec = new Recorder();
      const b = testBatcher({ store, sliceSize: 10, minSliceSize: 5, maxWaitMs: 700, eachIteration: rec.handler });
      b.createWorker({ concurrency: 2 });
      const pushedAt = Date.now();
      await b.performBatchLater(['a', 'b'], { key: 'k' });
      await b.performBatchLater(['c'], { key: 'k' });
      await waitFor(() => rec.calls.length > 0, { what: 'the slice' });
      const [slice] = rec.calls;
      expect(slice!.at - pushedAt).toBeGreaterThanOrEqual(700 - CLOCK_SLACK_MS);
      expect(slice!.at - pushedAt).toBeLessThan(5_000);
      expect([...slice!.ids].sort()).toEqual(['a', 'b', 'c']);
    });

    it('a push that brings a waiting key to minSliceSize starts it at once', async () => {
      const rec = new Recorder();
      const b = testBatcher({ store, sliceSize: 10, minSliceSize: 5, maxWaitMs: 60_000, eachIteration: rec.handler });
      b.createWorker({ concurrency: 2 });
      await b.performBatchLater(range(2), { key: 'k' });
      // Its job waits delayed: the key holds no worker slot, and nothing ran.
      await waitFor(() => waitsDelayed(b, 'k'), { what: "the key's job to wait" });
      const filledAt = Date.now();
      await b.performBatchLater(range(3, 'x'), { key: 'k' });
      await waitFor(() => rec.calls.length > 0, { what: 'the filled key' });
      expect(rec.calls[0]!.at - filledAt).toBeLessThan(10_000);
      expect([...rec.calls[0]!.ids].sort()).toEqual([...range(2), ...range(3, 'x')].sort());
    });
  });

  it('claims up to sliceSize once filled; ids left below minSliceSize wait again, from their own push', async () => {
    const rec = new Recorder();
    const b = testBatcher({ sliceSize: 10, minSliceSize: 5, maxWaitMs: 800, eachIteration: rec.handler });
    b.createWorker({ concurrency: 1 });
    const pushedAt = Date.now();
    await b.performBatchLater(range(23), { key: 'k' });
    await waitFor(() => rec.all.length === 23, { what: 'every id' });
    expect(rec.calls.map((c) => c.ids.length)).toEqual([10, 10, 3]);
    // The first two slices ran at once; the 3 left waited for their oldest's maxWaitMs.
    expect(rec.calls[1]!.at - pushedAt).toBeLessThan(700);
    expect(rec.calls[2]!.at - pushedAt).toBeGreaterThanOrEqual(800 - CLOCK_SLACK_MS);
    expect(rec.all).toEqual(range(23));
  });

  it("with shards and lanes: every shard's keys wait to fill, and a filled key starts at once", async () => {
    const rec = new Recorder();
    const b = testBatcher({ shards: 3, concurrencyPerKey: 2, sliceSize: 10, minSliceSize: 5, maxWaitMs: 700, eachIteration: rec.handler });
    b.createWorker({ concurrency: 4 });
    const keys = range(6, 'key-');
    const pushedAt = Date.now();
    for (const key of keys) await b.performBatchLater(range(2, `${key}:`), { key });
    await b.performBatchLater(range(5, 'full:'), { key: 'full' });
    await waitFor(() => rec.idsOf('full').length === 5, { what: 'the filled key' });
    expect(rec.calls.filter((c) => c.key !== 'full')).toEqual([]);
    await waitFor(() => keys.every((key) => rec.idsOf(key).length === 2), { what: 'every waiting key' });
    for (const key of keys) {
      const [slice] = rec.calls.filter((c) => c.key === key);
      expect(slice!.ids.length).toBe(2);
      expect(slice!.at - pushedAt).toBeGreaterThanOrEqual(700 - CLOCK_SLACK_MS);
    }
  });

  it('a waiting key holds no worker slot: other keys run meanwhile', async () => {
    const rec = new Recorder();
    const b = testBatcher({ sliceSize: 10, minSliceSize: 10, maxWaitMs: 60_000, eachIteration: rec.handler });
    b.createWorker({ concurrency: 1 });
    for (let k = 0; k < 5; k++) await b.performBatchLater(['a'], { key: `waiting-${k}` });
    await b.performBatchLater(range(10), { key: 'full' });
    await waitFor(() => rec.idsOf('full').length === 10, { what: 'the full key' });
    expect(rec.calls.map((c) => c.key)).toEqual(['full']);
  });

  it('per key: a function gives each key its own minSliceSize (its runs claim without the fetch)', async () => {
    const rec = new Recorder();
    const b = testBatcher({
      sliceSize: 10,
      minSliceSize: (key) => (key.startsWith('bulk') ? 5 : 1),
      maxWaitMs: 60_000,
      eachIteration: rec.handler,
    });
    b.createWorker({ concurrency: 2 });
    await b.performBatchLater(['b1', 'b2'], { key: 'bulk' });
    await b.performBatchLater(['f1'], { key: 'fast' });
    await waitFor(() => rec.idsOf('fast').length === 1, { what: 'the key that starts at once' });
    await waitFor(() => waitsDelayed(b, 'bulk'), { what: 'the bulk key to wait' });
    expect(rec.idsOf('bulk')).toEqual([]);
    await b.performBatchLater(['b3', 'b4', 'b5'], { key: 'bulk' });
    await waitFor(() => rec.idsOf('bulk').length === 5, { what: 'the filled bulk key' });
    expect(rec.calls.filter((c) => c.key === 'bulk')).toHaveLength(1);
  });

  it('composes with a pause: the key waits for the later of its pause and its fill', async () => {
    const rec = new Recorder();
    const b = testBatcher({ sliceSize: 10, minSliceSize: 5, maxWaitMs: 1_000, eachIteration: rec.handler });
    b.createWorker({ concurrency: 1 });
    await b.pause('k', { forMs: 300 });
    const pushedAt = Date.now();
    await b.performBatchLater(range(2), { key: 'k' });
    await waitFor(() => rec.calls.length > 0, { what: 'the key after its pause and fill' });
    expect(rec.calls[0]!.at - pushedAt).toBeGreaterThanOrEqual(1_000 - CLOCK_SLACK_MS);
    expect(rec.calls[0]!.ids).toEqual(range(2));
  });

  it("composes with the zset store's delays: ids count once ready, and wait from their ready time", async () => {
    const rec = new Recorder();
    const b = testBatcher({ store: 'zset', sliceSize: 10, minSliceSize: 3, maxWaitMs: 2_000, eachIteration: rec.handler });
    b.createWorker({ concurrency: 2 });
    const pushedAt = Date.now();
    // Three ids ready together fill the key as they become ready; one alone waits from its ready time.
    await b.performBatchLater(['a', 'b', 'c'], { key: 'three', delayMs: 300 });
    await b.performBatchLater(['d'], { key: 'one', delayMs: 300 });
    await waitFor(() => rec.idsOf('three').length === 3 && rec.idsOf('one').length === 1, { what: 'both keys' });
    const at = (key: string) => rec.calls.find((c) => c.key === key)!.at - pushedAt;
    expect(at('three')).toBeGreaterThanOrEqual(300 - CLOCK_SLACK_MS);
    expect(at('three')).toBeLessThan(2_300 - CLOCK_SLACK_MS);
    expect(at('one')).toBeGreaterThanOrEqual(2_300 - CLOCK_SLACK_MS);
  });

  it('composes with retries: a failed slice runs again after its backoff, without waiting to fill; new ids still wait', async () => {
    const rec = new Recorder();
    let failed = false;
    const b = testBatcher({
      sliceSize: 10,
      minSliceSize: 5,
      maxWaitMs: 60_000,
      backoff: { type: 'fixed', delayMs: 100 },
      eachIteration(ids, ctx) {
        rec.handler(ids, ctx);
        if (!failed) {
          failed = true;
          throw new Error('once');
        }
      },
    });
    b.createWorker({ concurrency: 1 });
    const pushedAt = Date.now();
    await b.performBatchLater(range(5), { key: 'k' });
    await waitFor(() => rec.calls.length === 2, { what: 'the retried slice' });
    // Well before maxWaitMs: the retry did not wait to fill.
    expect(rec.calls[1]!.at - pushedAt).toBeLessThan(10_000);
    expect(rec.calls[1]!.ids).toEqual(range(5));
    await b.performBatchLater(['late'], { key: 'k' });
    await waitFor(() => waitsDelayed(b, 'k'), { what: 'the new id to wait' });
    expect(rec.calls).toHaveLength(2);
  });

  it('rejects bad options with an InvalidOptionError, and a bad per-key result before anything is written', async () => {
    const base = { name: 'fill-options', connection: { host: '127.0.0.1', port: 1 }, eachIteration: () => {} };
    for (const bad of [
      { minSliceSize: 5 },
      { minSliceSize: () => 5 },
      { minSliceSize: 0, maxWaitMs: 100 },
      { minSliceSize: 1.5, maxWaitMs: 100 },
      { minSliceSize: 101, maxWaitMs: 100 },
      { sliceSize: 10, minSliceSize: 11, maxWaitMs: 100 },
      { minSliceSize: 5, maxWaitMs: -1 },
      { minSliceSize: 5, maxWaitMs: Number.POSITIVE_INFINITY },
      { minSliceSize: 5, maxWaitMs: Number.NaN },
      { minSliceSize: 5, maxWaitMs: 1.5 },
      { minSliceSize: '5', maxWaitMs: 100 },
      { maxWaitMs: 2 ** 31 },
    ]) {
      expect(() => resolveOptions({ ...base, ...(bad as object) }), JSON.stringify(bad)).toThrow(InvalidOptionError);
    }
    // maxWaitMs alone waits for a full slice.
    expect(resolveOptions({ ...base, sliceSize: 20, maxWaitMs: 100 }).fill).toEqual({ minSliceSize: 20, maxWaitMs: 100 });
    expect(resolveOptions(base).fill).toBeUndefined();

    const b = testBatcher({ sliceSize: 10, minSliceSize: (key) => (key === 'bad' ? 11 : 2), maxWaitMs: 100, eachIteration: () => {} });
    await expect(b.performBatchLater(['1'], { key: 'bad' })).rejects.toThrow(/minSliceSize\("bad"\)/);
    expect(await keysMatching(`*${b.name}*`)).toEqual([]);
  });
});
