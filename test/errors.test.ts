import { describe, expect, it } from 'vitest';
import { DEFAULTS, SliceTimeoutError, ThrownValueError, type BatcherEvents } from '../src';
import { backoffDelay } from '../src/engine/failures';
import { MAX_TIMER_MS } from '../src/options';
import { queueOf, range, Recorder, testBatcher, waitFor } from './helpers/redis';

describe('a slice that throws', () => {
  it("is retried after its backoff without another push, while the key's other ids go on", async () => {
    const rec = new Recorder();
    let failuresLeft = 2;
    const b = testBatcher({
      sliceSize: 10,
      backoff: { type: 'fixed', delayMs: 200 },
      eachIteration(ids, ctx) {
        if (ids.includes('0') && failuresLeft > 0) {
          failuresLeft--;
          throw new Error('boom');
        }
        rec.handler(ids, ctx);
      },
    });
    b.createWorker();
    await b.performBatchLater(range(25), { key: 'k' });
    await waitFor(() => rec.all.length === 25, { what: 'every id' });
    // The first slice backed off twice while the two after it ran; each id ran exactly once.
    expect(rec.calls.map((c) => c.ids[0])).toEqual(['10', '20', '0']);
    expect([...rec.all].sort()).toEqual(range(25).sort());
    expect(await b.backlog('k')).toEqual({ pending: 0, inFlight: 0, retrying: 0 });
  });

  it('does not delay other keys while a key backs off, and reports the failure to the logger', async () => {
    const rec = new Recorder();
    const logged: { message: string; meta?: Record<string, unknown> }[] = [];
    const b = testBatcher({
      logger: { warn: (message, meta) => void logged.push({ message, meta }) },
      backoff: { type: 'fixed', delayMs: 60_000 },
      eachIteration(ids, ctx) {
        if (ctx.key === 'broken') throw new Error('always');
        rec.handler(ids, ctx);
      },
    });
    b.createWorker({ concurrency: 1 });
    await b.performBatchLater(['x'], { key: 'broken' });
    for (const k of range(5, 'other-')) await b.performBatchLater(['y'], { key: k });
    await waitFor(() => rec.calls.length === 5, { what: 'other keys' });
    expect(await b.backlog('broken')).toEqual({ pending: 0, inFlight: 0, retrying: 1 });
    expect(logged[0]).toMatchObject({ message: 'batch-by-key: slice failed', meta: { key: 'broken', attempt: 1, outcome: 'retry' } });
    expect((logged[0]!.meta!.err as Error).message).toBe('always');
  });

  it('a push to a key whose only slice backs off runs at once', async () => {
    const rec = new Recorder();
    const b = testBatcher({
      backoff: { type: 'fixed', delayMs: 60_000 },
      eachIteration(ids, ctx) {
        if (ids.includes('bad')) throw new Error('later');
        rec.handler(ids, ctx);
      },
    });
    b.createWorker();
    await b.performBatchLater(['bad'], { key: 'k' });
    await waitFor(async () => (await b.backlog('k')).retrying === 1, { what: 'the backoff' });
    const pushedAt = Date.now();
    await b.performBatchLater(['good'], { key: 'k' });
    await waitFor(async () => rec.all.length > 0 && (await b.backlog('k')).inFlight === 0, { what: 'the new id' });
    // It ran, alone, long before the minute's backoff ended: the bad slice still waits it out.
    expect(rec.calls.map((c) => c.ids)).toEqual([['good']]);
    expect(rec.calls[0]!.at - pushedAt).toBeLessThan(5_000);
    expect(await b.backlog('k')).toEqual({ pending: 0, inFlight: 0, retrying: 1 });
  });

  it("while 10 slices of a key back off, the key claims no more (an outage does not burn every id's attempts)", async () => {
    let calls = 0;
    const b = testBatcher({
      sliceSize: 10,
      backoff: { type: 'fixed', delayMs: 60_000 },
      eachIteration() {
        calls++;
        throw new Error('database down');
      },
    });
    b.createWorker();
    await b.performBatchLater(range(200), { key: 'k' });
    await waitFor(async () => (await b.backlog('k')).retrying === 100, { what: '10 slices backing off' });
    const queue = queueOf(b);
    const job = await waitFor(async () => (await queue.getJobs(['delayed']))[0], { what: 'the key to wait for its retries' });
    expect(job.data.key).toBe('k');
    expect(calls).toBe(10);
    expect(await b.backlog('k')).toEqual({ pending: 100, inFlight: 0, retrying: 100 });
  });
});

describe('a key blocked by failed slices backing off', () => {
  it('waits delayed for its first retry instead of spinning through BullMQ', async () => {
    let calls = 0;
    const b = testBatcher({
      sliceSize: 1,
      backoff: { type: 'fixed', delayMs: 1500 },
      eachIteration() {
        calls++;
        throw new Error('database down');
      },
    });
    const worker = b.createWorker();
    let activations = 0;
    worker.on('active', () => void activations++);
    await b.performBatchLater(range(30), { key: 'k' });
    await waitFor(async () => (await b.backlog('k')).retrying === 10, { what: '10 slices backing off' });
    const blockedAt = activations;
    await waitFor(() => calls > 10, { timeoutMs: 10_000, what: 'the first retry' });
    // One activation brings the first retry; a spinning key would show hundreds.
    expect(activations - blockedAt).toBeLessThanOrEqual(3);
  });
});

describe('sliceTimeoutMs', () => {
  it('stops waiting for a slice that never returns: its signal aborts, it counts as failed, the key goes on', async () => {
    const rec = new Recorder();
    const reasons: unknown[] = [];
    const failures: BatcherEvents['slice:failed'][0][] = [];
    let first = true;
    const b = testBatcher({
      sliceSize: 2,
      sliceTimeoutMs: 200,
      backoff: { type: 'fixed', delayMs: 1 },
      async eachIteration(ids, ctx) {
        if (first) {
          first = false;
          ctx.signal.addEventListener('abort', () => reasons.push(ctx.signal.reason));
          await new Promise(() => {}); // hangs forever
        }
        rec.handler(ids, ctx);
      },
    });
    b.on('slice:failed', (event) => failures.push(event));
    b.createWorker();
    await b.performBatchLater(range(4), { key: 'k' });
    await waitFor(() => rec.all.length === 4);
    expect([...rec.all].sort()).toEqual(range(4));
    expect(reasons[0]).toBeInstanceOf(SliceTimeoutError);
    expect((reasons[0] as SliceTimeoutError).code).toBe('ERR_SLICE_TIMEOUT');
    expect(failures[0]).toMatchObject({ ids: ['0', '1'], attempt: 1, outcome: 'retry' });
    expect(failures[0]!.error).toBe(reasons[0]);
  });
});

describe('the error of slice:failed and dead', () => {
  it('is the Error the handler threw or gave ctx.fail, as it was, and any other value in a ThrownValueError', async () => {
    const failed: BatcherEvents['slice:failed'][0][] = [];
    const dead: BatcherEvents['dead'][0][] = [];
    const mine = new TypeError('mine');
    const b = testBatcher({
      attempts: 1,
      eachIteration(ids, ctx) {
        if (ctx.key === 'thrown') throw 'a plain string'; // eslint-disable-line @typescript-eslint/only-throw-error -- what the test is about
        ctx.fail(ids[0]!, { status: 404 });
        ctx.fail(ids[1]!, mine);
      },
    });
    b.on('slice:failed', (event) => failed.push(event)).on('dead', (event) => dead.push(event));
    b.createWorker();
    await b.performBatchLater(['x'], { key: 'thrown' });
    await b.performBatchLater(['a', 'b'], { key: 'reported' });
    await waitFor(() => dead.length === 3, { what: 'three dead events' });

    const thrown = failed.find((e) => e.key === 'thrown')!.error;
    expect(thrown).toBeInstanceOf(ThrownValueError);
    expect(thrown).toMatchObject({ code: 'ERR_THROWN_VALUE', value: 'a plain string', message: 'a plain string' });
    const reported = failed.find((e) => e.key === 'reported')!;
    expect(reported.errors!.get('b')).toBe(mine);
    expect(reported.errors!.get('a')).toMatchObject({ code: 'ERR_THROWN_VALUE', value: { status: 404 } });
    expect(dead.find((e) => e.ids.includes('b'))!.error).toBe(mine);
    expect(dead.find((e) => e.ids.includes('a'))!.error).toBeInstanceOf(ThrownValueError);
  });
});

describe('backoff', () => {
  it('computes fixed, exponential (capped) and custom delays', () => {
    expect(backoffDelay({ type: 'fixed', delayMs: 50 }, 3, null)).toBe(50);
    expect([1, 2, 3, 4].map((n) => backoffDelay({ type: 'exponential', delayMs: 100, maxDelayMs: 500 }, n, null))).toEqual([
      100, 200, 400, 500,
    ]);
    expect(backoffDelay((n) => n * 7, 3, null)).toBe(21);
    expect(backoffDelay(() => -5, 1, null)).toBe(0);
    expect(backoffDelay(() => Number.NaN, 1, null)).toBe(DEFAULTS.backoff.delayMs);
    // Never past Node's longest timer: 2^2000 would be Infinity, and fail-slice.lua gets JSON null for it.
    expect(backoffDelay({ type: 'exponential', delayMs: 1000 }, 2000, null)).toBe(MAX_TIMER_MS);
    expect(backoffDelay(() => 1e12, 1, null)).toBe(MAX_TIMER_MS);
    expect(DEFAULTS.backoff).toEqual({ type: 'exponential', delayMs: 1000, maxDelayMs: 60000 });
  });
});
