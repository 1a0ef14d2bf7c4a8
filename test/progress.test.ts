import { describe, expect, it } from 'vitest';
import { InvalidOptionError, PermanentError, UnknownTicketError, WaitTimeoutError, type Progress } from '../src';
import { range, testBatcher, waitFor } from './helpers/redis';

describe('bulk progress', () => {
  it("counts are exact at every poll against the handler's own record", async () => {
    const done: string[] = [];
    const failed: string[] = [];
    const mismatches: string[] = [];
    let ticket = '';
    const b = testBatcher({
      sliceSize: 10,
      attempts: 1,
      async eachIteration(ids) {
        // The claim of this slice acked the previous ones: the ticket must say exactly that.
        const seen = await b.progress(ticket);
        const expected: Progress = {
          total: 95,
          done: done.length,
          failed: failed.length,
          dropped: 0,
          pending: 95 - done.length - failed.length,
          errors: seen.errors,
          sealed: true,
        };
        if (JSON.stringify(seen) !== JSON.stringify(expected)) mismatches.push(JSON.stringify({ seen, expected }));
        const bad = ids.filter((id) => id.endsWith('7'));
        if (bad.length > 0) {
          failed.push(...bad);
          throw new PermanentError('ends in 7', { ids: bad });
        }
        done.push(...ids);
      },
    });
    ({ ticket } = (await b.performBatchLater(range(95), { key: 'k', track: true })) as { ticket: string });
    expect(await b.progress(ticket)).toEqual({ total: 95, done: 0, failed: 0, dropped: 0, pending: 95, errors: [], sealed: true });
    b.createWorker();
    const final = await b.waitFor(ticket);
    expect(mismatches).toEqual([]);
    expect(final).toMatchObject({ total: 95, done: 86, failed: 9, pending: 0 }); // 7, 17, …, 87
    expect(final.errors.map((e) => e.id).sort()).toEqual(failed.sort());
    expect(final.errors[0]!.message).toBe('ends in 7');
  });

  it.each(['set', 'zset'] as const)('%s: a deduplicated id counts once per push, done when its one run is', async (store) => {
    const runs: string[] = [];
    const b = testBatcher({ store, eachIteration: (ids) => void runs.push(...ids) });
    const first = await b.performBatchLater(['a', 'a', 'b'], { key: 'k', track: true });
    const second = await b.performBatchLater(['a', 'c'], { key: 'k', track: true });
    b.createWorker();
    expect(await b.waitFor(first.ticket)).toMatchObject({ total: 3, done: 3, failed: 0, pending: 0 });
    expect(await b.waitFor(second.ticket)).toMatchObject({ total: 2, done: 2, failed: 0, pending: 0 });
    expect(runs.sort()).toEqual(['a', 'b', 'c']);
  });

  it('list: each push of an id is its own run, credited to its own ticket', async () => {
    let release!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    const b = testBatcher({
      sliceSize: 1,
      async eachIteration(ids) {
        if (ids[0] === 'x') await gate;
      },
    });
    const first = await b.performBatchLater(['x', 'a'], { key: 'k', track: true });
    const second = await b.performBatchLater(['a'], { key: 'k', track: true });
    b.createWorker();
    await waitFor(async () => (await b.backlog('k')).inFlight === 1, { what: 'x in flight' });
    expect(await b.progress(first.ticket)).toMatchObject({ done: 0, pending: 2 });
    expect(await b.progress(second.ticket)).toMatchObject({ done: 0, pending: 1 });
    release();
    expect(await b.waitFor(first.ticket)).toMatchObject({ total: 2, done: 2 });
    expect(await b.waitFor(second.ticket)).toMatchObject({ total: 1, done: 1 });
  });

  it('retries and splits keep the counts exact: only ids that end dead count as failed', async () => {
    const b = testBatcher({
      attempts: 2,
      backoff: { type: 'fixed', delayMs: 1 },
      eachIteration(ids) {
        if (ids.includes('13')) throw new Error('13 is unlucky');
      },
    });
    b.createWorker();
    const { ticket } = await b.performBatchLater(range(40), { key: 'k', track: true });
    expect(await b.waitFor(ticket)).toEqual({
      total: 40,
      done: 39,
      failed: 1,
      dropped: 0,
      pending: 0,
      errors: [{ id: '13', message: '13 is unlucky' }],
      sealed: true,
    });
  });

  it('a push of no ids has a ticket with nothing pending; untracked pushes have none', async () => {
    const b = testBatcher({ eachIteration: () => {} });
    const empty = await b.performBatchLater([], { key: 'k', track: true });
    expect(await b.waitFor(empty.ticket)).toEqual({ total: 0, done: 0, failed: 0, dropped: 0, pending: 0, errors: [], sealed: true });
    expect((await b.performBatchLater(['1'], { key: 'k' })).ticket).toBeUndefined();
  });

  it('waitFor rejects with a WaitTimeoutError carrying the last progress', async () => {
    const b = testBatcher({ eachIteration: () => {} }); // no worker: nothing moves
    const { ticket } = await b.performBatchLater(['1', '2'], { key: 'k', track: true });
    const error = await b.waitFor(ticket, { timeoutMs: 200, pollMs: 20 }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(WaitTimeoutError);
    expect(error).toMatchObject({ code: 'ERR_WAIT_TIMEOUT', progress: { total: 2, pending: 2 } });
  });

  it('waitFor refuses a pollMs or timeoutMs past the longest Node timer (which would fire at once)', async () => {
    const b = testBatcher({ eachIteration: () => {} });
    const { ticket } = await b.performBatchLater(['1'], { key: 'k', track: true });
    await expect(b.waitFor(ticket, { pollMs: 2 ** 31 })).rejects.toThrow(/waitFor options.pollMs must be a number > 0 and <= 2147483647/);
    await expect(b.waitFor(ticket, { timeoutMs: 3e9 })).rejects.toThrow(InvalidOptionError);
  });

  it('tickets expire after ticketTtlMs; unknown ones throw UnknownTicketError', async () => {
    const b = testBatcher({ ticketTtlMs: 1000, eachIteration: () => {} });
    const { ticket } = await b.performBatchLater(['1'], { key: 'k', track: true });
    expect((await b.progress(ticket)).total).toBe(1);
    const expired = await waitFor(
      () =>
        b.progress(ticket).then(
          () => undefined,
          (e: unknown) => e,
        ),
      { timeoutMs: 5_000, intervalMs: 100 },
    );
    expect(expired).toBeInstanceOf(UnknownTicketError);
    expect((expired as UnknownTicketError).code).toBe('ERR_UNKNOWN_TICKET');
    await expect(b.progress('not a ticket')).rejects.toThrow(InvalidOptionError);
    await expect(b.performBatchLater(['1'], { key: 'k', track: 'yes' as never })).rejects.toThrow(/track must be a boolean/);
    await expect(b.waitFor(ticket, { timeoutMs: -1 })).rejects.toThrow(/timeoutMs must be a number > 0/);
  });
});
