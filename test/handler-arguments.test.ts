import { describe, expect, it } from 'vitest';
import { NotInSliceError, PermanentError, type BatcherEvents, type StoreKind } from '../src';
import { keyspaceOf, range, redisClient, testBatcher, waitFor } from './helpers/redis';

/**
 * What a handler gets is its own: it may splice, sort or overwrite the ids it was given. The
 * run's record of the slice (what to ack, fail, retry, count) stays whole whatever it does. The
 * same holds for what listeners get, and what user code throws is data to check, not to trust.
 */
const STORES: StoreKind[] = ['list', 'set', 'zset'];

/** Long enough that a ticket stuck with pending ids fails the test, rather than hangs it. */
const SETTLED = { timeoutMs: 20_000 };

describe.each(STORES)('a handler that changes its ids array (%s store)', (store) => {
  it('chunks by splice and throws in the second chunk: every id is processed or dead-lettered, and the ticket settles', async () => {
    const inserted = new Set<string>();
    const b = testBatcher({
      store,
      sliceSize: 10,
      attempts: 2,
      backoff: { type: 'fixed', delayMs: 1 },
      async eachIteration(ids) {
        while (ids.length) {
          const chunk = ids.splice(0, 3);
          // A poison row: the chunk holding it fails, whichever chunk of whichever part it lands in.
          if (chunk.includes('4')) throw new Error('bad row 4');
          await Promise.resolve();
          for (const id of chunk) inserted.add(id);
        }
      },
    });
    b.createWorker();
    const { ticket } = await b.performBatchLater(range(10), { key: 'k', track: true });
    expect(await b.waitFor(ticket, SETTLED)).toMatchObject({ total: 10, done: 9, failed: 1, pending: 0 });
    expect([...inserted].sort()).toEqual(range(10).filter((id) => id !== '4'));
    expect((await b.deadLetters.list()).letters.map((l) => l.id)).toEqual(['4']);
    expect(await b.backlog('k')).toEqual({ pending: 0, inFlight: 0, retrying: 0 });
  });

  it('splices its ids and then runs past sliceTimeoutMs: the retry carries the whole slice', async () => {
    const runs: { attempt: number; ids: string[] }[] = [];
    const b = testBatcher({
      store,
      sliceSize: 10,
      sliceTimeoutMs: 200,
      backoff: { type: 'fixed', delayMs: 1 },
      async eachIteration(ids, ctx) {
        runs.push({ attempt: ctx.attempt, ids: [...ids] });
        if (ctx.attempt === 1) {
          ids.splice(0, 5);
          await new Promise(() => {}); // hangs forever
        }
      },
    });
    b.createWorker();
    const { ticket } = await b.performBatchLater(range(10), { key: 'k', track: true });
    expect(await b.waitFor(ticket, SETTLED)).toMatchObject({ total: 10, done: 10, failed: 0, pending: 0 });
    expect(runs.map((r) => r.attempt)).toEqual([1, 2]);
    expect([...runs[1]!.ids].sort()).toEqual(range(10));
  });

  it('ctx.fail checks the slice, not the array: a real id spliced out is accepted, an id pushed onto it is refused', async () => {
    const ran: string[] = [];
    const refused: unknown[] = [];
    const b = testBatcher({
      store,
      sliceSize: 10,
      eachIteration(ids, ctx) {
        ran.push(...ids);
        const mine = ids.splice(0);
        if (mine.includes('0')) ctx.fail('0', new PermanentError('bad row 0'));
        ids.push('zzz');
        try {
          ctx.fail('zzz', new Error('not of this slice'));
        } catch (err) {
          refused.push(err);
        }
      },
    });
    b.createWorker();
    const { ticket } = await b.performBatchLater(range(3), { key: 'k', track: true });
    expect(await b.waitFor(ticket, SETTLED)).toMatchObject({ total: 3, done: 2, failed: 1, pending: 0 });
    expect(refused).toHaveLength(1);
    expect(refused[0]).toBeInstanceOf(NotInSliceError);
    // 'zzz' never ran as a retry.
    expect([...ran].sort()).toEqual(range(3));
    expect((await b.deadLetters.list()).letters.map((l) => [l.id, l.error.message])).toEqual([['0', 'bad row 0']]);
  });

  it('empties its ids with splice(0): slice:done and the processed count still name the whole slice', async () => {
    const done: BatcherEvents['slice:done'][0][] = [];
    const b = testBatcher({
      store,
      sliceSize: 10,
      history: { intervalMs: 100 },
      eachIteration(ids) {
        ids.splice(0);
      },
    });
    b.on('slice:done', (event) => done.push(event));
    b.createWorker();
    const { ticket } = await b.performBatchLater(range(3), { key: 'k', track: true });
    expect(await b.waitFor(ticket, SETTLED)).toMatchObject({ done: 3, pending: 0 });
    expect(done.flatMap((e) => e.ids).sort()).toEqual(range(3));
    const redis = redisClient();
    // The history sampler adds the process's processed count at its next tick.
    await waitFor(async () => Number(await redis.get(keyspaceOf(b).history.processed)) === 3, {
      timeoutMs: 10_000,
      what: 'the count of 3 ids processed',
    });
  });

  it('changes the data it reads: a dead letter keeps the data as pushed', async () => {
    const b = testBatcher<{ row: number; tags: string[] }>({
      store,
      eachIteration(ids, ctx) {
        for (const id of ids) {
          const data = ctx.data(id)!;
          data.row = -1;
          data.tags.push('seen');
          ctx.payloads(id)[0]!.tags.splice(0);
          ctx.fail(id, new PermanentError(`bad row ${id}`));
        }
      },
    });
    b.createWorker();
    const { ticket } = await b.performBatchLater([{ id: 'a', data: { row: 1, tags: ['x'] } }], { key: 'k', track: true });
    expect(await b.waitFor(ticket, SETTLED)).toMatchObject({ failed: 1, pending: 0 });
    expect((await b.deadLetters.list()).letters.map((l) => [l.id, l.data])).toEqual([['a', { row: 1, tags: ['x'] }]]);
  });
});

describe('what other user code gets or throws', () => {
  it("a handler that rewrites its job's data: the run still settles its own key, and the ticket's callback runs", async () => {
    const settled: string[] = [];
    const b = testBatcher({
      eachIteration(ids, ctx) {
        ctx.job.data.key = 'elsewhere';
      },
      onTicketSettled: (_outcome, ticket) => void settled.push(ticket),
    });
    b.createWorker();
    const { ticket } = await b.performBatchLater(range(3), { key: 'k', track: true });
    expect(await b.waitFor(ticket, SETTLED)).toMatchObject({ done: 3, pending: 0 });
    await waitFor(() => settled.length === 1, { what: "the ticket's callback" });
    expect(settled).toEqual([ticket]);
  });

  it('a slice:failed listener that empties its dead and errors changes nothing the run reports after it', async () => {
    const dead: BatcherEvents['dead'][0][] = [];
    const b = testBatcher({
      eachIteration(ids, ctx) {
        for (const id of ids) ctx.fail(id, new PermanentError(`bad row ${id}`));
      },
    });
    b.on('slice:failed', (event) => {
      (event.dead as string[]).splice(0);
      (event.errors as Map<string, unknown>).clear();
    });
    b.on('dead', (event) => dead.push(event));
    b.createWorker();
    const { ticket } = await b.performBatchLater(range(2), { key: 'k', track: true });
    expect(await b.waitFor(ticket, SETTLED)).toMatchObject({ failed: 2, pending: 0 });
    await waitFor(() => dead.length === 2, { what: 'a dead event per error' });
    expect(dead.map((e) => [e.ids, e.error.message]).sort()).toEqual([
      [['0'], 'bad row 0'],
      [['1'], 'bad row 1'],
    ]);
  });

  it('an error whose name, message and stack getters throw is dead-lettered as the slice failure it is', async () => {
    const warnings: string[] = [];
    const b = testBatcher({
      attempts: 1,
      isolateFailures: false,
      logger: { warn: (message) => warnings.push(message) },
      eachIteration() {
        const error = new Error('hidden');
        // The stack first: redefining it formats the stack, which reads the name.
        for (const field of ['stack', 'message', 'name'])
          Object.defineProperty(error, field, {
            get() {
              throw new Error(`no ${field} for you`);
            },
          });
        throw error;
      },
    });
    b.createWorker();
    const { ticket } = await b.performBatchLater(range(2), { key: 'k', track: true });
    expect(await b.waitFor(ticket, SETTLED)).toMatchObject({ failed: 2, pending: 0 });
    const { letters } = await b.deadLetters.list();
    expect(letters.map((l) => [l.id, l.attempts, l.error.message]).sort()).toEqual([
      ['0', 1, '(an unprintable value)'],
      ['1', 1, '(an unprintable value)'],
    ]);
    // Its one run failed, and that was all: it was not mistaken for Redis trouble and run again.
    expect(warnings.filter((w) => w.includes('run interrupted'))).toEqual([]);
  });

  it('a backoff function that throws delays the retry as one that returns garbage does', async () => {
    let runs = 0;
    const b = testBatcher({
      attempts: 2,
      backoff: () => {
        throw new Error('no delay for you');
      },
      eachIteration() {
        runs++;
        if (runs === 1) throw new Error('first run fails');
      },
    });
    b.createWorker();
    const { ticket } = await b.performBatchLater(range(2), { key: 'k', track: true });
    expect(await b.waitFor(ticket, SETTLED)).toMatchObject({ done: 2, failed: 0, pending: 0 });
    expect(runs).toBe(2);
  });
});
