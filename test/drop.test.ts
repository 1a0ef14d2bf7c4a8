import { describe, expect, it } from 'vitest';
import { InvalidKeyError, InvalidOptionError, type Batcher, type StoreKind } from '../src';
import { Gate } from './helpers/gate';
import { keysMatching, queueOf, range, Recorder, testBatcher, waitFor } from './helpers/redis';

const STORES: readonly StoreKind[] = ['list', 'set', 'zset'];

/** The key's names left in Redis, its tickets' hashes aside (they outlive their ids by ticketTtlMs). */
async function leftOf(b: Batcher, key: string): Promise<string[]> {
  return (await keysMatching(`*${b.name}*{${key}}*`)).filter((name) => !name.includes(':ticket:'));
}

/** The key's jobs that have not run yet. */
async function jobsWaiting(b: Batcher, key: string): Promise<number> {
  const jobs = await queueOf(b).getJobs(['waiting', 'delayed', 'prioritized']);
  return jobs.filter((job) => job.data.key === key).length;
}

describe('drop(key, options?)', () => {
  describe.each(STORES)('store %s', (store) => {
    it('during a running slice: the slice is abandoned (its ids never run again), nothing of the key is left, its ticket settles as dropped', async () => {
      const gate = new Gate();
      const rec = new Recorder();
      const started = new Gate();
      const lost: string[] = [];
      const b = testBatcher({
        store,
        sliceSize: 2,
        async eachIteration(ids, ctx) {
          rec.handler(ids, ctx);
          started.open();
          await gate.opened;
        },
      });
      b.on('interrupted', ({ reason }) => lost.push(reason));
      const { ticket } = await b.performBatchLater(range(6), { key: 'k', track: true });
      b.createWorker();
      await started.opened;

      const dropped = await b.drop('k');
      expect(dropped).toEqual({ pending: 4, inFlight: 2, retrying: 0, tickets: 1, deadLetters: 0 });
      const progress = await b.waitFor(ticket, { timeoutMs: 5_000 });
      expect(progress).toMatchObject({ total: 6, done: 0, failed: 0, dropped: 6, pending: 0, sealed: true });
      expect(await b.backlog('k')).toEqual({ pending: 0, inFlight: 0, retrying: 0 });

      // The handler ends after the drop: its ack is refused (the lock went with the drop).
      gate.open();
      await waitFor(() => lost.includes('lock_lost'), { what: 'the run to find its lock lost' });
      await waitFor(async () => (await leftOf(b, 'k')).length === 0, { what: 'nothing of the key left' });
      expect(await b.backlog('k')).toEqual({ pending: 0, inFlight: 0, retrying: 0 });
      // The abandoned slice's ids were not run again, nor any dropped id.
      await new Promise((r) => setTimeout(r, 300));
      expect(rec.calls).toHaveLength(1);
      expect((await b.progress(ticket)).dropped).toBe(6);
    });

    it('racing 100 concurrent pushes: each push is dropped or kept whole, and every kept id runs once', async () => {
      const rec = new Recorder();
      const b = testBatcher({ store, sliceSize: 50, eachIteration: rec.handler });
      const pushes = range(100).map((i) => [`${i}-a`, `${i}-b`, `${i}-c`]);
      // Connected and the scripts loaded first; then the pushes, spread over about 100 ms, and the
      // drop as soon as the first push landed, amid the others.
      await b.backlog('k');
      await b.performBatchLater(['warm'], { key: 'other' });
      const pushed = pushes.map((ids, i) => new Promise((r) => setTimeout(r, i)).then(() => b.performBatchLater(ids, { key: 'k' })));
      await pushed[0];
      const [dropped] = await Promise.all([b.drop('k'), ...pushed]);
      expect(dropped.pending % 3).toBe(0);
      expect(dropped.pending).toBeGreaterThanOrEqual(3);
      expect(dropped.pending).toBeLessThan(300);
      b.createWorker();
      const kept = 300 - dropped.pending;
      await waitFor(() => rec.idsOf('k').length >= kept, { what: 'every kept id to run' });
      await waitFor(async () => (await b.backlog('k')).pending === 0);
      await new Promise((r) => setTimeout(r, 200));
      const ran = rec.idsOf('k');
      expect(ran).toHaveLength(kept);
      expect(new Set(ran).size).toBe(kept);
      // Whole: each push's ids all ran, or none did.
      for (const ids of pushes) expect([0, 3]).toContain(ids.filter((id) => ran.includes(id)).length);
    });

    it('of a paused key: its backlog goes, its pause stays; new pushes run after resume, once each', async () => {
      const rec = new Recorder();
      const b = testBatcher({ store, eachIteration: rec.handler });
      b.createWorker();
      await b.pause('k');
      await b.performBatchLater(range(5), { key: 'k' });
      expect(await b.drop('k')).toMatchObject({ pending: 5, inFlight: 0, retrying: 0 });
      expect(await b.paused()).toEqual([{ key: 'k' }]);
      expect(await b.backlog('k')).toEqual({ pending: 0, inFlight: 0, retrying: 0 });
      await b.performBatchLater(['x', 'y'], { key: 'k' });
      await b.resume('k');
      await waitFor(() => rec.all.length >= 2, { what: 'the new pushes' });
      await new Promise((r) => setTimeout(r, 200));
      expect([...rec.all].sort()).toEqual(['x', 'y']);
    });

    it('of a key waiting to fill: its delayed job is removed, and a push after it runs normally', async () => {
      const rec = new Recorder();
      const b = testBatcher({ store, sliceSize: 10, minSliceSize: 5, maxWaitMs: 60_000, eachIteration: rec.handler });
      b.createWorker();
      await b.performBatchLater(range(2), { key: 'k' });
      await waitFor(async () => (await queueOf(b).getDelayed()).some((job) => job.data.key === 'k'), { what: "the key's job to wait" });
      expect(await b.drop('k')).toMatchObject({ pending: 2, inFlight: 0, retrying: 0 });
      expect(await jobsWaiting(b, 'k')).toBe(0);
      expect(await leftOf(b, 'k')).toEqual([]);
      await b.performBatchLater(range(5, 'n'), { key: 'k' });
      await waitFor(() => rec.all.length >= 5, { what: 'the new ids' });
      await new Promise((r) => setTimeout(r, 200));
      expect([...rec.all].sort()).toEqual(range(5, 'n'));
    });

    it('of a key with ids at both levels: both go, with their tickets; then new pushes run once each', async () => {
      const rec = new Recorder();
      const b = testBatcher({ store, eachIteration: rec.handler });
      const normal = await b.performBatchLater(['n1', 'n2', 'n3'], { key: 'k', track: true });
      const high = await b.performBatchLater(['h1', 'h2'], { key: 'k', track: true, priority: 'high' });
      expect(await b.drop('k')).toEqual({ pending: 5, inFlight: 0, retrying: 0, tickets: 2, deadLetters: 0 });
      expect(await b.waitFor(normal.ticket)).toMatchObject({ total: 3, dropped: 3, pending: 0 });
      expect(await b.waitFor(high.ticket)).toMatchObject({ total: 2, dropped: 2, pending: 0 });
      expect(await leftOf(b, 'k')).toEqual([]);
      expect(await jobsWaiting(b, 'k')).toBe(0);
      await b.performBatchLater(['a', 'b'], { key: 'k' });
      await b.performBatchLater(['c'], { key: 'k', priority: 'high' });
      b.createWorker();
      await waitFor(() => rec.all.length >= 3, { what: 'the new pushes' });
      await new Promise((r) => setTimeout(r, 200));
      expect([...rec.all].sort()).toEqual(['a', 'b', 'c']);
    });
  });

  it('with lanes (concurrencyPerKey 2): the slices in flight in every lane are counted and abandoned', async () => {
    const gate = new Gate();
    const rec = new Recorder();
    const lost: string[] = [];
    const b = testBatcher({
      sliceSize: 2,
      concurrencyPerKey: 2,
      async eachIteration(ids, ctx) {
        rec.handler(ids, ctx);
        await gate.opened;
      },
    });
    b.on('interrupted', ({ reason }) => lost.push(reason));
    await b.performBatchLater(range(10), { key: 'k' });
    b.createWorker();
    await waitFor(() => rec.calls.length === 2, { what: 'both lanes running' });
    expect(await b.drop('k')).toEqual({ pending: 6, inFlight: 4, retrying: 0, tickets: 0, deadLetters: 0 });
    gate.open();
    await waitFor(() => lost.includes('lock_lost'), { what: 'the run to find its lock lost' });
    await waitFor(async () => (await leftOf(b, 'k')).length === 0, { what: 'nothing of the key left' });
    await new Promise((r) => setTimeout(r, 300));
    expect(rec.calls).toHaveLength(2);
  });

  it('counts failed slices backing off as retrying, and settles their tickets as dropped (with a callback)', async () => {
    const settled: { dropped: number; success: boolean }[] = [];
    const b = testBatcher({
      sliceSize: 10,
      attempts: 5,
      backoff: { type: 'fixed', delayMs: 60_000 },
      eachIteration() {
        throw new Error('down');
      },
      onTicketSettled(outcome) {
        settled.push({ dropped: outcome.dropped, success: outcome.success });
      },
    });
    const { ticket } = await b.performBatchLater(range(3), { key: 'k', track: true, callback: true });
    b.createWorker();
    await waitFor(async () => (await b.backlog('k')).retrying === 3, { what: 'the slice to back off' });
    expect(await b.drop('k')).toEqual({ pending: 0, inFlight: 0, retrying: 3, tickets: 1, deadLetters: 0 });
    expect(await b.waitFor(ticket)).toMatchObject({ total: 3, failed: 0, dropped: 3, pending: 0 });
    await waitFor(() => settled.length > 0, { what: 'the callback' });
    expect(settled).toEqual([{ dropped: 3, success: false }]);
    expect(await leftOf(b, 'k')).toEqual([]);
  });

  it('with deadLetters: true, also removes the key dead letters (only that key)', async () => {
    const b = testBatcher({
      sliceSize: 10,
      attempts: 1,
      eachIteration(ids, ctx) {
        if (ctx.key === 'other') throw new Error('no');
        for (const id of ids) if (id.startsWith('bad')) ctx.fail(id, new Error('no'));
      },
    });
    b.createWorker();
    await b.performBatchLater(['bad1', 'bad2', 'ok'], { key: 'k' });
    await b.performBatchLater(['x'], { key: 'other' });
    await waitFor(async () => (await b.deadLetters.count()) === 3, { what: 'the dead letters' });
    expect((await b.drop('k')).deadLetters).toBe(0);
    expect(await b.deadLetters.count({ key: 'k' })).toBe(2);
    expect(await b.drop('k', { deadLetters: true })).toEqual({ pending: 0, inFlight: 0, retrying: 0, tickets: 0, deadLetters: 2 });
    expect(await b.deadLetters.count({ key: 'k' })).toBe(0);
    expect(await b.deadLetters.count({ key: 'other' })).toBe(1);
  });

  it('a bad key or options throw the typed error backlog(key) throws, before anything is written', async () => {
    const b = testBatcher({ eachIteration: () => {} });
    await expect(b.backlog('')).rejects.toThrow(InvalidKeyError);
    await expect(b.drop('')).rejects.toThrow(InvalidKeyError);
    await expect(b.drop(42 as unknown as string)).rejects.toThrow(InvalidKeyError);
    await expect(b.drop('k', { deadLetters: 'yes' as unknown as boolean })).rejects.toThrow(InvalidOptionError);
    await expect(b.drop('k', { everything: true } as never)).rejects.toThrow(InvalidOptionError);
    expect(await keysMatching(`*${b.name}*`)).toEqual([]);
  });

  it('of a key with nothing: zero counts', async () => {
    const b = testBatcher({ eachIteration: () => {} });
    expect(await b.drop('k')).toEqual({ pending: 0, inFlight: 0, retrying: 0, tickets: 0, deadLetters: 0 });
  });
});
