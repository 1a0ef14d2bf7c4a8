import { describe, expect, it } from 'vitest';
import { NotInSliceError, PermanentError, type BatcherEvents, type StoreKind } from '../src';
import { Gate } from './helpers/gate';
import { keysMatching, range, testBatcher, waitFor } from './helpers/redis';

interface Row {
  row: number;
}

/** A run of the handler, as it saw its slice. */
interface Run {
  ids: string[];
  attempt: number;
  data: Record<string, Row | undefined>;
}

const BAD = new Set(['7', '42', '93']);
const ATTEMPTS = 3;

describe.each<{ label: string; store: StoreKind; concurrencyPerKey?: number; sliceSize?: number; shards?: number }>([
  { label: 'list', store: 'list' },
  { label: 'set', store: 'set' },
  { label: 'zset', store: 'zset' },
  // Four lanes over slices of 25, on two shard queues: the bad ids fail in three slices at once.
  { label: 'list, 4 lanes, 2 shards', store: 'list', concurrencyPerKey: 4, sliceSize: 25, shards: 2 },
])('ctx.fail: an outcome per id ($label)', ({ store, concurrencyPerKey, sliceSize, shards }) => {
  it('100 ids, 3 failing: the 97 run once and are done; the 3 retry with their data, then die with their own errors', async () => {
    const runs: Run[] = [];
    // Holds the second attempt of the bad ids, so the ticket can be read between the two outcomes.
    const gate = new Gate();
    const b = testBatcher<Row>({
      store,
      attempts: ATTEMPTS,
      backoff: { type: 'fixed', delayMs: 1 },
      ...(concurrencyPerKey && { concurrencyPerKey }),
      ...(sliceSize && { sliceSize }),
      ...(shards && { shards }),
      async eachIteration(ids, ctx) {
        runs.push({ ids: [...ids], attempt: ctx.attempt, data: Object.fromEntries(ids.map((id) => [id, ctx.data(id)])) });
        if (ctx.attempt === 2) await gate.opened;
        for (const id of ids) if (BAD.has(id)) ctx.fail(id, new Error(`bad row ${id}`));
      },
    });
    b.createWorker({ concurrency: 2 });
    const { ticket } = await b.performBatchLater(
      range(100).map((id) => ({ id, data: { row: Number(id) } })),
      { key: 'acct', track: true },
    );

    // Every good id acked by its slice's one call; the bad ones back to pending, none failed yet.
    const between = await waitFor(
      async () => {
        const p = await b.progress(ticket);
        return p.done === 97 && p;
      },
      { what: '97 done' },
    );
    expect(between).toMatchObject({ total: 100, done: 97, failed: 0, pending: 3 });
    const dataKeys = `*${b.name}:bbk:*data*`;
    // The failed ids' data waits with them, in the key's retry data (or in flight with their retry).
    expect(await keysMatching(dataKeys)).not.toEqual([]);
    gate.open();
    const end = await b.waitFor(ticket);
    expect(end).toMatchObject({ total: 100, done: 97, failed: 3, pending: 0 });
    expect(end.errors.map((e) => [e.id, e.message]).sort()).toEqual([...BAD].sort().map((id) => [id, `bad row ${id}`]));

    const timesRun = new Map<string, number>();
    for (const run of runs) for (const id of run.ids) timesRun.set(id, (timesRun.get(id) ?? 0) + 1);
    for (const id of range(100)) expect(timesRun.get(id), `runs of ${id}`).toBe(BAD.has(id) ? ATTEMPTS : 1);
    // Each retry carried only failed ids, each with its own data.
    const retries = runs.filter((run) => run.attempt > 1);
    expect(retries.length).toBeGreaterThan(0);
    for (const run of retries) {
      expect(run.ids.every((id) => BAD.has(id))).toBe(true);
      for (const id of run.ids) expect(run.data[id]).toEqual({ row: Number(id) });
    }

    const { letters } = await b.deadLetters.list();
    expect(letters.map((l) => [l.id, l.attempts, l.error.message, l.data]).sort()).toEqual(
      [...BAD].sort().map((id) => [id, ATTEMPTS, `bad row ${id}`, { row: Number(id) }]),
    );
    expect(await b.backlog('acct')).toEqual({ pending: 0, inFlight: 0, retrying: 0 });
    // The acked ids' data went with their ack, the failed ids' with their letters: none is left behind.
    expect(await keysMatching(dataKeys)).toEqual([]);
  });
});

describe('ctx.fail', () => {
  it('an id not in the slice is a NotInSliceError; a number names its id; a call once the slice has ended changes nothing', async () => {
    const thrown: unknown[] = [];
    let late: ((id: string) => void) | undefined;
    const b = testBatcher({
      eachIteration(ids, ctx) {
        try {
          ctx.fail('not-mine', new Error('x'));
        } catch (err) {
          thrown.push(err);
        }
        ctx.fail(1, new PermanentError('gone'));
        late = (id) => ctx.fail(id, new Error('too late'));
      },
    });
    b.createWorker();
    const { ticket } = await b.performBatchLater(['0', '1', '2'], { key: 'k', track: true });
    expect(await b.waitFor(ticket)).toMatchObject({ done: 2, failed: 1 });
    expect(thrown).toHaveLength(1);
    expect(thrown[0]).toBeInstanceOf(NotInSliceError);
    expect(thrown[0]).toMatchObject({ code: 'ERR_NOT_IN_SLICE', message: expect.stringContaining('"not-mine"') });
    // A handler's leftover callback: no throw (it would be uncaught), and '0' stays done.
    expect(() => late!('0')).not.toThrow();
    expect(await b.progress(ticket)).toMatchObject({ done: 2, failed: 1 });
    expect((await b.deadLetters.list()).letters).toHaveLength(1);
  });

  it('an id failed with a PermanentError dies at once; a throw still fails the whole slice, dropping what was reported', async () => {
    const runs: string[][] = [];
    const events: BatcherEvents['slice:failed'][0][] = [];
    const done: string[][] = [];
    let throwOnce = true;
    const b = testBatcher({
      attempts: 2,
      backoff: { type: 'fixed', delayMs: 1 },
      eachIteration(ids, ctx) {
        runs.push([...ids]);
        if (ids.includes('b')) ctx.fail('b', new PermanentError('b is gone'));
        if (throwOnce) {
          throwOnce = false;
          throw new Error('the whole slice');
        }
      },
    });
    b.on('slice:failed', (e) => events.push(e));
    b.on('slice:done', (e) => done.push([...e.ids]));
    b.createWorker();
    const { ticket } = await b.performBatchLater(['a', 'b', 'c'], { key: 'k', track: true });
    expect(await b.waitFor(ticket)).toMatchObject({ done: 2, failed: 1, errors: [{ id: 'b', message: 'b is gone' }] });
    // The events follow the call that counted the ticket.
    await waitFor(() => done.length === 1, { what: 'slice:done' });
    // The throw retried the whole slice; its second run reported 'b' dead, acked 'a' and 'c', and nothing ran again.
    expect(runs).toEqual([
      ['a', 'b', 'c'],
      ['a', 'b', 'c'],
    ]);
    expect(events.map((e) => [e.ids, e.outcome, e.errors?.size, e.acked])).toEqual([
      [['a', 'b', 'c'], 'retry', undefined, undefined],
      [['b'], 'dead', 1, 2],
    ]);
    expect(done).toEqual([['a', 'c']]);
    const { letters } = await b.deadLetters.list();
    expect(letters.map((l) => [l.id, l.attempts, l.error.name, l.error.message])).toEqual([['b', 2, 'PermanentError', 'b is gone']]);
  });
});
