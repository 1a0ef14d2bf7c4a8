import { describe, expect, it } from 'vitest';
import { batchByKey, InvalidOptionError, KeyBacklogFullError, PermanentError, type Batcher, type StoreKind } from '../src';
import { Gate } from './helpers/gate';
import {
  keysMatching,
  keyspaceOf,
  prefixOf,
  range,
  Recorder,
  redisClient,
  testBatcher,
  testConnection,
  track,
  uniqueName,
  waitFor,
} from './helpers/redis';

/** Every Redis key of a batcher with its value (DUMP), to tell that a call wrote nothing at all. */
async function snapshot(b: Batcher): Promise<Map<string, string>> {
  const client = redisClient();
  const names = (await keysMatching(`*${b.name}*`)).sort();
  const dumps = await Promise.all(names.map(async (name) => [name, (await client.dumpBuffer(name))?.toString('hex') ?? ''] as const));
  return new Map(dumps);
}

/** The refusal a push of `ids` to `key` meets. */
async function refusal(b: Batcher, ids: string[], key: string): Promise<KeyBacklogFullError> {
  const err: unknown = await b.performBatchLater(ids, { key }).then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(KeyBacklogFullError);
  return err as KeyBacklogFullError;
}

const STORES: StoreKind[] = ['list', 'set', 'zset'];

describe('maxPendingPerKey', () => {
  for (const store of STORES) {
    describe(`${store} store`, () => {
      it('refuses a push that would take the key past its limit, whole, with the key, the limit and what is pending', async () => {
        const b = testBatcher({ store, maxPendingPerKey: 5, eachIteration: () => {} });
        await b.performBatchLater(range(3, 'a'), { key: 'acct' });
        const err = await refusal(b, range(3, 'b'), 'acct');
        expect(err).toMatchObject({ name: 'KeyBacklogFullError', code: 'ERR_KEY_BACKLOG_FULL', key: 'acct', limit: 5, pending: 3 });
        expect(err.message).toContain('maxPendingPerKey (5)');
        expect((await b.backlog('acct')).pending).toBe(3); // nothing of the refused push landed
        // Up to the limit, exactly, is accepted; one more is not.
        await b.performBatchLater(range(2, 'b'), { key: 'acct' });
        expect((await b.backlog('acct')).pending).toBe(5);
        expect((await refusal(b, ['c'], 'acct')).pending).toBe(5);
        // Other keys are judged on their own.
        await b.performBatchLater(range(5, 'x'), { key: 'other' });
        expect((await b.backlog('other')).pending).toBe(5);
      });

      it('a refused push writes nothing: no id, data, ticket, index entry or job', async () => {
        const b = testBatcher<{ n: number }>({ store, maxPendingPerKey: 3, eachIteration: () => {} });
        // A key that is empty (the push alone is too big) and one that is full.
        await b.performBatchLater(range(3, 'p'), { key: 'full' });
        // BullMQ records its version in the queue's meta once its connection is up, after a push or before.
        const meta = `${prefixOf(b.name)}:${b.name}:meta`;
        await waitFor(async () => (await redisClient().hget(meta, 'version')) !== null, { what: "BullMQ's meta" });
        const before = await snapshot(b);
        const items = range(4, 'q').map((id, n) => ({ id, data: { n } }));
        await expect(b.performBatchLater(items, { key: 'empty', track: true })).rejects.toThrow(KeyBacklogFullError);
        await expect(b.performBatchLater(items.slice(0, 1), { key: 'full', track: true })).rejects.toThrow(KeyBacklogFullError);
        expect(await snapshot(b)).toEqual(before);
        // A push to an open ticket: the ticket counts none of its ids.
        const ticket = await b.openTicket('full');
        const withTicket = await snapshot(b);
        await expect(b.performBatchLater(items.slice(0, 1), { ticket })).rejects.toThrow(KeyBacklogFullError);
        expect(await snapshot(b)).toEqual(withTicket);
        expect((await b.progress(ticket)).total).toBe(0);
        expect(await keysMatching(`*${b.name}*{empty}*`)).toEqual([]);
      });
    });
  }

  it('set and zset: only the ids a push would add count; a pending id pushed again adds none', async () => {
    for (const store of ['set', 'zset'] as const) {
      const b = testBatcher({ store, maxPendingPerKey: 4, eachIteration: () => {} });
      await b.performBatchLater(['1', '2', '3'], { key: 'k' });
      // 1, 2 and 3 are pending, and 4 is pushed twice: one id added, 4 pending in the end.
      await b.performBatchLater(['1', '2', '3', '4', '4'], { key: 'k' });
      expect((await b.backlog('k')).pending).toBe(4);
      // Pending ids again: accepted, at the limit (a zset moves them, a set merges them).
      await b.performBatchLater(['4', '1'], store === 'zset' ? { key: 'k', delayMs: 50 } : { key: 'k' });
      const err = await refusal(b, ['1', '5'], 'k');
      expect(err).toMatchObject({ pending: 4, limit: 4 });
      expect(err.message).toContain('would add 1');
    }
  });

  it('counts the ids waiting only: in-flight ids do not count', async () => {
    const gate = new Gate();
    const started = new Gate();
    const rec = new Recorder();
    const b = testBatcher({
      maxPendingPerKey: 5,
      sliceSize: 5,
      async eachIteration(ids, ctx) {
        started.open();
        await gate.opened;
        rec.handler(ids, ctx);
      },
    });
    b.createWorker();
    await b.performBatchLater(range(5, 'a'), { key: 'k' });
    await started.opened;
    expect(await b.backlog('k')).toEqual({ pending: 0, inFlight: 5, retrying: 0 });
    await b.performBatchLater(range(5, 'b'), { key: 'k' });
    await expect(b.performBatchLater(['c'], { key: 'k' })).rejects.toThrow(KeyBacklogFullError);
    gate.open();
    await waitFor(() => rec.all.length === 10, { what: 'both slices' });
    expect(rec.all).toEqual([...range(5, 'a'), ...range(5, 'b')]);
  });

  it('a slice handed back at a graceful close goes to pending past the limit, by at most a slice, and is not lost', async () => {
    const started = new Gate();
    const b = testBatcher({
      maxPendingPerKey: 5,
      sliceSize: 3,
      // Gives up its slice when the worker closes: the slice is handed back to pending.
      eachIteration: (ids, ctx) =>
        new Promise((_, reject) => {
          ctx.signal.addEventListener('abort', () => reject(ctx.signal.reason as Error));
          started.open();
        }),
    });
    const worker = b.createWorker();
    await b.performBatchLater(range(3, 'a'), { key: 'k' });
    await started.opened;
    await b.performBatchLater(range(5, 'b'), { key: 'k' });
    await worker.close();
    // sliceSize (× concurrencyPerKey) past the limit: refusing the slice would have lost it.
    expect(await b.backlog('k')).toEqual({ pending: 8, inFlight: 0, retrying: 0 });
    expect((await refusal(b, ['c'], 'k')).pending).toBe(8);
  });

  it('under concurrent pushes never takes a key past its limit, and runs every accepted id once', async () => {
    const limit = 50;
    const rec = new Recorder();
    const b = testBatcher({ maxPendingPerKey: limit, sliceSize: 7, eachIteration: rec.handler });
    const pushAll = (label: string, n: number) =>
      Promise.all(
        range(n, `${label}-`).map(async (id) => {
          const ids = [`${id}/0`, `${id}/1`, `${id}/2`];
          try {
            await b.performBatchLater(ids, { key: 'hot' });
            return ids;
          } catch (err) {
            expect(err).toBeInstanceOf(KeyBacklogFullError);
            expect((err as KeyBacklogFullError).pending).toBeGreaterThan(limit - 3);
            return [];
          }
        }),
      ).then((accepted) => accepted.flat());
    // No worker yet: 200 pushes of 3 ids race for 50 places; exactly 16 fit.
    const first = await pushAll('a', 200);
    expect(first).toHaveLength(48);
    expect((await b.backlog('hot')).pending).toBe(48);
    // With a worker draining, pushes are refused and accepted as places free up; pending, read
    // all along, never exceeds the limit.
    b.createWorker();
    const client = redisClient();
    const pending = keyspaceOf(b).forKey('hot').pending;
    let most = 0;
    let pushing = true;
    const sampling = (async () => {
      while (pushing) most = Math.max(most, await client.llen(pending));
    })();
    const second = await pushAll('b', 300).finally(() => (pushing = false));
    await sampling;
    expect(most).toBeLessThanOrEqual(limit);
    await waitFor(() => rec.all.length === first.length + second.length, { what: 'every accepted id' });
    expect(rec.all.sort()).toEqual([...first, ...second].sort()); // each accepted id once, no refused one
    expect(await b.backlog('hot')).toEqual({ pending: 0, inFlight: 0, retrying: 0 });
  });

  it('takes a per-key function: undefined is no limit, a bad result refuses the push before anything is written', async () => {
    const b = testBatcher({
      maxPendingPerKey: (key) => (key === 'small' ? 2 : key === 'broken' ? 0 : key === 'throws' ? thrower() : undefined),
      eachIteration: () => {},
    });
    await expect(b.performBatchLater(range(3), { key: 'small' })).rejects.toThrow(KeyBacklogFullError);
    await b.performBatchLater(range(1000), { key: 'big' });
    expect((await b.backlog('big')).pending).toBe(1000);
    await expect(b.performBatchLater(['1'], { key: 'broken' })).rejects.toThrow(
      new InvalidOptionError('options.maxPendingPerKey("broken") must be an integer >= 1, got number 0'),
    );
    await expect(b.performBatchLater(['1'], { key: 'throws' })).rejects.toThrow('no limit for you');
    expect(await keysMatching(`*${b.name}*{broken}*`)).toEqual([]);
    expect(await keysMatching(`*${b.name}*{throws}*`)).toEqual([]);
  });

  it('is validated when the batcher is defined', () => {
    for (const bad of [0, -1, 1.5, Number.NaN, '5', null, {}]) {
      expect(() => batchByKey({ name: uniqueName(), connection: testConnection(), maxPendingPerKey: bad as never })).toThrow(
        InvalidOptionError,
      );
    }
    const b = track(batchByKey({ name: uniqueName(), connection: testConnection(), maxPendingPerKey: 1 }));
    expect(b.name).toBeTruthy();
  });

  it('works with shards: each key judged on its own, whatever its shard', async () => {
    const rec = new Recorder();
    const b = testBatcher({ shards: 3, maxPendingPerKey: 4, eachIteration: rec.handler });
    const keys = range(6, 'acct-');
    for (const key of keys) await b.performBatchLater(range(4, `${key}/`), { key });
    for (const key of keys) await expect(b.performBatchLater(['late'], { key })).rejects.toThrow(KeyBacklogFullError);
    b.createWorker();
    await waitFor(() => rec.all.length === 24, { what: 'every accepted id' });
    expect(rec.all.filter((id) => id === 'late')).toEqual([]);
  });

  it('deadLetters.requeue judges each key on its own: a full key keeps its letters, the others are requeued', async () => {
    const poison = new Set(['full/x', 'full/y', 'free/z']);
    const rec = new Recorder();
    const warnings: string[] = [];
    const b = testBatcher({
      maxPendingPerKey: 3,
      attempts: 1,
      logger: { warn: (message: string) => warnings.push(message) },
      eachIteration(ids, ctx) {
        const bad = ids.filter((id) => poison.has(`${ctx.key}/${id}`));
        if (bad.length > 0) throw new PermanentError('poison', { ids: bad });
        rec.handler(ids, ctx);
      },
    });
    const worker = b.createWorker();
    await b.performBatchLater(['x', 'y'], { key: 'full' });
    await b.performBatchLater(['z'], { key: 'free' });
    await waitFor(async () => (await b.deadLetters.count()) === 3, { what: 'three dead letters' });
    await worker.close();
    await b.performBatchLater(range(3, 'fill'), { key: 'full' });
    expect(await b.deadLetters.requeue()).toBe(1);
    expect((await b.deadLetters.list({ key: 'full' })).letters.map((l) => l.id).sort()).toEqual(['x', 'y']);
    expect(await b.deadLetters.count({ key: 'free' })).toBe(0);
    expect(await b.backlog('free')).toMatchObject({ pending: 1 });
    expect(await b.backlog('full')).toMatchObject({ pending: 3 });
    expect(warnings.some((w) => w.includes('"full"') && w.includes('maxPendingPerKey (3)'))).toBe(true);
  });

  it('a refused push leaves its key’s index entry as it was (on a Cluster, it is judged before the index is written)', async () => {
    const b = testBatcher({ maxPendingPerKey: 2, eachIteration: () => {} });
    const client = redisClient();
    const index = keyspaceOf(b).index;
    // The first push adds the key's job in its own call (no index entry); the second, covered by
    // that job, lists the key.
    await b.performBatchLater(['1'], { key: 'k' });
    await b.performBatchLater(['2'], { key: 'k' });
    const score = await client.zscore(index, 'k');
    expect(score).not.toBeNull();
    await waitFor(() => Date.now() > Number(score), { what: 'a later ms than the entry' });
    await expect(b.performBatchLater(['3'], { key: 'k' })).rejects.toThrow(KeyBacklogFullError);
    await expect(b.performBatchLater(['1', '2', '3'], { key: 'fresh' })).rejects.toThrow(KeyBacklogFullError);
    expect(await client.zscore(index, 'k')).toBe(score);
    expect(await client.zscore(index, 'fresh')).toBeNull();
  });
});

function thrower(): never {
  throw new Error('no limit for you');
}
