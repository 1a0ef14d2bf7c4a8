import { describe, expect, it } from 'vitest';
import { DEFAULTS, SliceTimeoutError } from '../src';
import { backoffDelay } from '../src/options';
import { queueOf, range, Recorder, testBatcher, waitFor } from './helpers/redis';

describe('a slice that throws', () => {
  it('keeps its ids, releases the key, and is retried with backoff without another push', async () => {
    const rec = new Recorder();
    let failuresLeft = 2;
    const b = testBatcher({
      sliceSize: 10,
      backoff: { type: 'fixed', delayMs: 20 },
      eachIteration(ids, ctx) {
        if (ctx.key === 'flaky' && failuresLeft > 0) {
          failuresLeft--;
          throw new Error('boom');
        }
        rec.handler(ids, ctx);
      },
    });
    b.createWorker({ concurrency: 2 });
    await b.performBatchLater(range(25), { key: 'flaky' });
    await b.performBatchLater(range(5, 'ok-'), { key: 'healthy' });
    await waitFor(() => rec.idsOf('flaky').length === 25, { what: 'flaky key to finish' });
    // The failed slice came back first, in order: nothing lost, nothing reordered.
    expect(rec.idsOf('flaky')).toEqual(range(25));
    expect(rec.idsOf('healthy')).toEqual(range(5, 'ok-'));
    expect(await b.backlog('flaky')).toEqual({ pending: 0, inFlight: 0 });
  });

  it('does not delay other keys while a key backs off, and reports the failure to the logger', async () => {
    const rec = new Recorder();
    const logged: { message: string; meta?: Record<string, unknown> }[] = [];
    const b = testBatcher({
      logger: { error: (message, meta) => void logged.push({ message, meta }) },
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
    expect(await b.backlog('broken')).toEqual({ pending: 1, inFlight: 0 });
    expect(logged[0]).toMatchObject({ message: 'batch-by-key: slice failed', meta: { key: 'broken', failures: 1, attempts: 5 } });
    expect((logged[0]!.meta!.err as Error).message).toBe('always');
  });

  it('after `attempts` failures in a row the job fails in BullMQ, the ids stay pending, and recover() resumes the key', async () => {
    let broken = true;
    const rec = new Recorder();
    const b = testBatcher({
      attempts: 3,
      backoff: { type: 'fixed', delayMs: 5 },
      eachIteration(ids, ctx) {
        if (broken) throw new Error('still broken');
        rec.handler(ids, ctx);
      },
    });
    const queue = queueOf(b);
    const worker = b.createWorker();
    const failed = new Promise<Error>((resolve) => worker.on('failed', (_job, err) => resolve(err)));
    await b.performBatchLater(range(7), { key: 'k' });
    expect((await failed).message).toBe('still broken');
    expect(await b.backlog('k')).toEqual({ pending: 7, inFlight: 0 });
    expect(await queue.getFailedCount()).toBe(1);

    broken = false;
    expect(await b.recover()).toBe(1);
    await waitFor(() => rec.all.length === 7);
    expect(rec.all).toEqual(range(7));
  });

  it('counts failures per run of bad luck: a success resets the count', async () => {
    let calls = 0;
    const rec = new Recorder();
    const b = testBatcher({
      sliceSize: 1,
      attempts: 2,
      backoff: { type: 'fixed', delayMs: 1 },
      eachIteration(ids, ctx) {
        calls++;
        // Every other call fails: never two failures in a row, so the key never gives up.
        if (calls % 2 === 1) throw new Error('odd');
        rec.handler(ids, ctx);
      },
    });
    b.createWorker();
    await b.performBatchLater(range(6), { key: 'k' });
    await waitFor(() => rec.all.length === 6);
    expect(rec.all).toEqual(range(6));
  });
});

describe('the failure count', () => {
  it('lives in Redis per key: a job BullMQ re-creates after a failure does not start from zero', async () => {
    let calls = 0;
    const b = testBatcher({
      attempts: 3,
      backoff: { type: 'fixed', delayMs: 5 },
      async eachIteration() {
        calls++;
        // A push while the job is active makes BullMQ start a new job when this one ends.
        if (calls === 1) await b.performBatchLater(['more'], { key: 'k' });
        throw new Error('broken');
      },
    });
    const worker = b.createWorker();
    let failedJobs = 0;
    worker.on('failed', () => void failedJobs++);
    await b.performBatchLater(['1'], { key: 'k' });
    await waitFor(() => failedJobs === 2, { what: 'both jobs to fail' });
    // 3 attempts for the first job; the re-created one starts at failure 3 and gives up after 1.
    expect(calls).toBe(4);
    expect(await b.backlog('k')).toEqual({ pending: 2, inFlight: 0 });
  });
});

describe('sliceTimeoutMs', () => {
  it('stops waiting for a slice that never returns: its signal aborts, it counts as failed, the key goes on', async () => {
    const rec = new Recorder();
    const reasons: unknown[] = [];
    const failures: unknown[] = [];
    let first = true;
    const b = testBatcher({
      sliceSize: 2,
      sliceTimeoutMs: 200,
      backoff: { type: 'fixed', delayMs: 1 },
      logger: { error: (_m, meta) => void failures.push(meta?.err) },
      async eachIteration(ids, ctx) {
        if (first) {
          first = false;
          ctx.signal.addEventListener('abort', () => reasons.push(ctx.signal.reason));
          await new Promise(() => {}); // hangs forever
        }
        rec.handler(ids, ctx);
      },
    });
    b.createWorker();
    await b.performBatchLater(range(4), { key: 'k' });
    await waitFor(() => rec.all.length === 4);
    expect(rec.all).toEqual(range(4));
    expect(reasons[0]).toBeInstanceOf(SliceTimeoutError);
    expect((reasons[0] as SliceTimeoutError).code).toBe('ERR_SLICE_TIMEOUT');
    expect(failures[0]).toBe(reasons[0]);
  });
});

describe('backoff', () => {
  it('computes fixed, exponential (capped) and custom delays', () => {
    expect(backoffDelay({ type: 'fixed', delayMs: 50 }, 3, null)).toBe(50);
    expect([1, 2, 3, 4].map((n) => backoffDelay({ type: 'exponential', delayMs: 100, maxDelayMs: 500 }, n, null))).toEqual([100, 200, 400, 500]);
    expect(backoffDelay((n) => n * 7, 3, null)).toBe(21);
    expect(backoffDelay(() => -5, 1, null)).toBe(0);
    expect(backoffDelay(() => Number.NaN, 1, null)).toBe(DEFAULTS.backoff.delayMs);
    expect(DEFAULTS.backoff).toEqual({ type: 'exponential', delayMs: 1000, maxDelayMs: 60000 });
  });
});
