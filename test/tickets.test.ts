import { describe, expect, expectTypeOf, it } from 'vitest';
import {
  batchByKey,
  CallbackFailedError,
  CallbackTimeoutError,
  PermanentError,
  ShutdownError,
  TicketSealedError,
  UnknownTicketError,
  type Batcher,
  type PerformResult,
  type Ticket,
  type TicketOutcome,
  type TrackedPerformResult,
} from '../src';
import { claim, release } from '../src/storage/protocol';
import { defineScripts } from '../src/storage/scripts';
import { keyspaceOf, queueOf, range, redisClient, testBatcher, testConnection, track, uniqueName, waitFor } from './helpers/redis';

/** Callbacks as they ran, across every batcher given `onTicketSettled: record`. */
function callbacks() {
  const ran: TicketOutcome[] = [];
  return { ran, record: (outcome: TicketOutcome) => void ran.push(outcome) };
}

const ticketJob = async (b: Parameters<typeof queueOf>[0], ticket: string) =>
  queueOf(b).getJob(`bbk-ticket-${ticket.slice(ticket.lastIndexOf('.') + 1)}`);

describe('the types of a tracked push', () => {
  it('has a string ticket with track: true or an open ticket, and a possibly undefined one otherwise', () => {
    // Compiled, never called: `npm test` type-checks this file first.
    const pushes = (b: Batcher, open: Ticket) =>
      [
        b.performBatchLater(['1'], { key: 'k', track: true }),
        b.performBatchLater(['1'], { ticket: open, callback: false }),
        b.performBatchLater(['1'], { key: 'k' }),
      ] as const;
    expectTypeOf(pushes).returns.toEqualTypeOf<
      readonly [Promise<TrackedPerformResult>, Promise<TrackedPerformResult>, Promise<PerformResult>]
    >();
    type Results = ReturnType<typeof pushes>;
    expectTypeOf<Awaited<Results[0]>['ticket']>().toEqualTypeOf<string>();
    expectTypeOf<Awaited<Results[1]>['ticket']>().toEqualTypeOf<string>();
    expectTypeOf<Awaited<Results[2]>['ticket']>().toEqualTypeOf<string | undefined>();
  });
});

describe('onTicketSettled', () => {
  it('a callback that never settles does not hold worker.close(): its signal aborts with a ShutdownError, and the job waits for the next worker', async () => {
    const signals: AbortSignal[] = [];
    const name = uniqueName();
    const options = {
      name,
      connection: testConnection(),
      eachIteration: () => {},
      onTicketSettled: (_outcome: TicketOutcome, _ticket: string, signal: AbortSignal) => {
        signals.push(signal);
        return new Promise<void>(() => {}); // never settles, and ignores its signal
      },
    };
    const b = track(batchByKey(options));
    const worker = b.createWorker();
    const { ticket } = await b.performBatchLater(['1'], { key: 'k', track: true });
    await waitFor(() => signals.length === 1, { what: 'the callback to start' });
    await worker.close(); // would never resolve if close waited for the callback
    expect(signals[0]!.aborted).toBe(true);
    expect(signals[0]!.reason).toBeInstanceOf(ShutdownError);
    // No attempt spent: the job waits for a worker, which runs the callback again.
    const job = await ticketJob(b, ticket);
    expect(job?.attemptsMade ?? 0).toBe(0);
    const next = track(batchByKey({ ...options, onTicketSettled: () => void signals.push(new AbortController().signal) }));
    next.createWorker();
    await waitFor(() => signals.length === 2, { what: 'the callback on the next worker' });
  });

  it('a callback that runs past sliceTimeoutMs gets a CallbackTimeoutError on its signal and is retried', async () => {
    const signals: AbortSignal[] = [];
    const b = testBatcher({
      sliceTimeoutMs: 200,
      attempts: 2,
      eachIteration: () => {},
      onTicketSettled: (_outcome, _ticket, signal) => {
        signals.push(signal);
        return new Promise<void>(() => {});
      },
    });
    b.createWorker();
    await b.performBatchLater(['1'], { key: 'k', track: true });
    await waitFor(() => signals.length === 2, { what: 'the retried callback', timeoutMs: 10_000 });
    expect(signals[0]!.reason).toBeInstanceOf(CallbackTimeoutError);
  });

  it('a callback that throws undefined (or any non-Error) fails that attempt with a CallbackFailedError, and is retried', async () => {
    let calls = 0;
    const b = testBatcher({
      eachIteration: () => {},
      onTicketSettled: () => {
        calls++;
        // eslint-disable-next-line @typescript-eslint/only-throw-error -- the point of the test
        if (calls === 1) throw undefined;
      },
    });
    const failures: Error[] = [];
    b.createWorker().on('failed', (_job, err) => failures.push(err));
    await b.performBatchLater(['1'], { key: 'k', track: true });
    await waitFor(() => calls === 2, { what: 'the retried callback' });
    expect(failures).toHaveLength(1);
    expect(failures[0]).toBeInstanceOf(CallbackFailedError);
    expect(failures[0]).toMatchObject({
      code: 'ERR_CALLBACK_FAILED',
      cause: undefined,
      message: expect.stringContaining('threw undefined'),
    });
  });

  it('runs once per tracked push when its last id is done or dead, saying complete vs success', async () => {
    const cb = callbacks();
    const b = testBatcher({
      sliceSize: 5,
      onTicketSettled: cb.record,
      eachIteration: (ids) => {
        if (ids.includes('bad')) throw new PermanentError('bad id', { ids: ['bad'] });
      },
    });
    b.createWorker();
    const clean = await b.performBatchLater(range(12), { key: 'a', track: true });
    const dirty = await b.performBatchLater(['x', 'bad', 'y'], { key: 'b', track: true });
    await waitFor(() => cb.ran.length === 2, { what: 'both callbacks' });
    const byTicket = Object.fromEntries(cb.ran.map((o) => [o.ticket, o]));
    expect(byTicket[clean.ticket]).toMatchObject({ total: 12, done: 12, failed: 0, pending: 0, success: true, sealed: true });
    expect(byTicket[dirty.ticket]).toMatchObject({
      total: 3,
      done: 2,
      failed: 1,
      pending: 0,
      success: false,
      errors: [{ id: 'bad', message: 'bad id' }],
    });
  });

  it('fires once per ticket when two workers and four lanes race on the last ids', async () => {
    const cb = callbacks();
    const name = uniqueName();
    const make = () =>
      track(
        batchByKey({
          name,
          connection: testConnection(),
          sliceSize: 3,
          concurrencyPerKey: 4,
          onTicketSettled: cb.record,
          eachIteration: () => {},
        }),
      );
    const [one, two] = [make(), make()];
    const tickets: string[] = [];
    for (let i = 0; i < 30; i++) tickets.push((await one.performBatchLater(range(7, `${i}-`), { key: `k${i % 3}`, track: true })).ticket);
    one.createWorker({ concurrency: 3 });
    two.createWorker({ concurrency: 3 });
    await waitFor(() => cb.ran.length >= 30, { what: '30 callbacks' });
    // Settled ids are acked before their callback job is added: once all 30 ran, any double is already queued.
    await waitFor(async () => (await queueOf(one).getJobCounts('wait', 'active', 'delayed', 'prioritized')).wait === 0, {
      what: 'an idle queue',
    });
    expect(cb.ran.map((o) => o.ticket).sort()).toEqual([...tickets].sort());
  });

  it('a worker that dies between settling the last id and adding the callback job: the recovery sweep adds it, once', async () => {
    const cb = callbacks();
    const b = testBatcher({ onTicketSettled: cb.record, eachIteration: () => {} });
    const { ticket } = await b.performBatchLater(range(3), { key: 'k', track: true, callback: true });
    // What a worker does, up to the settling ack, and then it dies.
    const redis = redisClient();
    defineScripts(redis);
    const names = keyspaceOf(b).forKey('k');
    const lock = { value: 'dying-run', ttlMs: 60_000 };
    const first = await claim(redis, 'list', names, { lock, claimId: 'c1', settle: 'recover', count: 10, takeLock: true });
    expect(first.held && first.ids).toEqual(range(3));
    expect((await release(redis, names, lock.value, 'ack')).settled).toEqual([ticket.slice(ticket.lastIndexOf('.') + 1)]);
    expect(await b.progress(ticket)).toMatchObject({ done: 3, pending: 0 });
    expect(await ticketJob(b, ticket)).toBeUndefined();

    b.createWorker();
    await b.recover();
    await waitFor(() => cb.ran.length === 1, { what: 'the callback' });
    await waitFor(async () => (await ticketJob(b, ticket))?.finishedOn !== undefined, { what: 'the callback job to finish' });
    expect(await redis.llen(names.settledTickets)).toBe(0);
    // A worker that died after adding the job but before clearing the outbox (its key still
    // indexed: a sweep drains a key's outbox before it drops the key): the next sweep's add finds
    // the completed job and adds nothing.
    await redis.rpush(names.settledTickets, ticket.slice(ticket.lastIndexOf('.') + 1));
    await redis.zadd(keyspaceOf(b).index, 0, 'k');
    await b.recover();
    expect(await redis.llen(names.settledTickets)).toBe(0);
    expect((await queueOf(b).getJobCounts('wait', 'delayed', 'prioritized')).wait).toBe(0);
    expect(cb.ran.map((o) => o.ticket)).toEqual([ticket]);
  });

  it('a callback that throws runs again (at least once), with the same ticket', async () => {
    const seen: string[] = [];
    const b = testBatcher({
      attempts: 3,
      onTicketSettled: (_outcome, ticket) => {
        seen.push(ticket);
        if (seen.length === 1) throw new Error('the mailer is down');
      },
      eachIteration: () => {},
    });
    b.createWorker();
    const { ticket } = await b.performBatchLater(['1'], { key: 'k', track: true });
    await waitFor(() => seen.length === 2, { what: 'the retried callback', timeoutMs: 10_000 });
    expect(seen).toEqual([ticket, ticket]);
  });

  it('a tracked push of no ids settles at once and calls back', async () => {
    const cb = callbacks();
    const b = testBatcher({ onTicketSettled: cb.record, eachIteration: () => {} });
    b.createWorker();
    const { ticket } = await b.performBatchLater([], { key: 'k', track: true });
    await waitFor(() => cb.ran.length === 1, { what: 'the callback' });
    expect(cb.ran[0]).toMatchObject({ ticket, total: 0, pending: 0, success: true });
  });
});

describe('open tickets', () => {
  it('do not settle before they are sealed, however many of their ids are done; then call back once', async () => {
    const cb = callbacks();
    const b = testBatcher({ sliceSize: 4, onTicketSettled: cb.record, eachIteration: () => {} });
    b.createWorker();
    const ticket = await b.openTicket('import-7');
    expect(await b.progress(ticket)).toMatchObject({ total: 0, pending: 0, sealed: false });
    await b.performBatchLater(range(10, 'p1-'), { ticket });
    await waitFor(async () => (await b.progress(ticket)).done === 10, { what: 'the first page' });
    await b.performBatchLater(range(6, 'p2-'), { ticket, key: 'import-7' });
    await waitFor(async () => (await b.progress(ticket)).done === 16 && (await b.backlog('import-7')).pending === 0, {
      what: 'the second page',
    });
    await waitFor(async () => (await queueOf(b).getJobCounts('active', 'wait')).active === 0, { what: 'the run to end' });
    expect(cb.ran).toEqual([]);
    expect(await ticketJob(b, ticket)).toBeUndefined();

    await b.sealTicket(ticket);
    await waitFor(() => cb.ran.length === 1, { what: 'the callback' });
    expect(cb.ran[0]).toMatchObject({ ticket, total: 16, done: 16, success: true, sealed: true });
    expect(await b.waitFor(ticket)).toMatchObject({ total: 16, pending: 0, sealed: true });
  });

  it('refuse pushes once sealed, and unknown tickets, with typed errors and nothing written', async () => {
    const b = testBatcher({ eachIteration: () => {} });
    const ticket = await b.openTicket('k');
    await b.performBatchLater(['1'], { ticket });
    await b.sealTicket(ticket);
    await expect(b.performBatchLater(['2'], { ticket })).rejects.toThrow(TicketSealedError);
    await expect(b.sealTicket(ticket)).rejects.toThrow(TicketSealedError);
    expect(await b.backlog('k')).toEqual({ pending: 1, inFlight: 0, retrying: 0 });
    const unknown = `k.${'0'.repeat(8)}-0000-4000-8000-${'0'.repeat(12)}`;
    await expect(b.performBatchLater(['3'], { ticket: unknown })).rejects.toThrow(UnknownTicketError);
    await expect(b.sealTicket(unknown)).rejects.toThrow(UnknownTicketError);
    await expect(b.performBatchLater(['4'], { ticket, key: 'other' })).rejects.toThrow(/not the key of options.ticket/);
    await expect(b.performBatchLater(['5'], { ticket, track: true })).rejects.toThrow(/not both/);
    expect(await b.backlog('k')).toEqual({ pending: 1, inFlight: 0, retrying: 0 });
    expect(await b.backlog('other')).toEqual({ pending: 0, inFlight: 0, retrying: 0 });
  });
});
