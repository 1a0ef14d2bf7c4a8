import { describe, expect, it } from 'vitest';
import { ShutdownError } from '../src';
import { range, testBatcher, waitFor } from './helpers/redis';
import { sleep } from './helpers/time';

describe('worker.close()', () => {
  it('lets the running slice finish, releases the key, and another worker resumes it at once', async () => {
    const byWorker: Record<string, string[]> = { first: [], second: [] };
    let current: 'first' | 'second' = 'first';
    const abortedDuringSlice: boolean[] = [];
    const b = testBatcher({
      sliceSize: 10,
      // Long enough that the test would time out if the second worker had to wait for the TTL.
      lockTtlMs: 120_000,
      async eachIteration(ids, ctx) {
        const owner = current;
        await sleep(10);
        abortedDuringSlice.push(ctx.signal.aborted);
        byWorker[owner]!.push(...ids);
      },
    });
    const first = b.createWorker();
    await b.performBatchLater(range(400), { key: 'k' });
    await waitFor(() => byWorker.first!.length >= 50, { what: 'the first worker to be busy' });

    const closing = first.close();
    current = 'second';
    b.createWorker();
    await closing;
    await waitFor(() => byWorker.first!.length + byWorker.second!.length === 400, { timeoutMs: 20_000 });

    const all = [...byWorker.first!, ...byWorker.second!];
    expect(all).toEqual(range(400)); // each id once, in order
    expect(byWorker.second!.length).toBeGreaterThan(0);
    expect(abortedDuringSlice).toContain(true); // the slice running at close() saw the signal
  });

  it('the signal reason says why', async () => {
    let reason: unknown;
    let started!: () => void;
    const running = new Promise<void>((r) => (started = r));
    const b = testBatcher({
      async eachIteration(_ids, ctx) {
        started();
        await new Promise((resolve) => ctx.signal.addEventListener('abort', resolve, { once: true }));
        reason = ctx.signal.reason;
      },
    });
    const worker = b.createWorker();
    await b.performBatchLater(['a', 'b'], { key: 'k' });
    await running;
    await worker.close();
    expect(reason).toBeInstanceOf(ShutdownError);
    expect((reason as ShutdownError).code).toBe('ERR_SHUTDOWN');
    expect((reason as Error).message).toContain('worker closing');
    expect(await b.backlog('k')).toEqual({ pending: 0, inFlight: 0, retrying: 0 });
  });
});

describe("worker.cancelJob on a createWorker's worker", () => {
  it('stops that run after its slice, with the reason on ctx.signal; the key requeues and every id runs once, in order', async () => {
    const seen: string[] = [];
    const reasons: unknown[] = [];
    let jobId: string | undefined;
    let cancelled = false;
    const b = testBatcher({
      sliceSize: 5,
      async eachIteration(ids, ctx) {
        jobId = ctx.job.id;
        await sleep(5);
        if (ctx.signal.aborted) reasons.push(ctx.signal.reason);
        seen.push(...ids);
      },
    });
    b.on('interrupted', () => void (cancelled = true));
    const worker = b.createWorker();
    await b.performBatchLater(range(100), { key: 'k' });
    await waitFor(() => seen.length >= 10, { what: 'the run to be under way' });
    expect(worker.cancelJob(jobId!, 'cancelled by the test')).toBe(true);
    await waitFor(() => seen.length === 100, { what: 'every id' });
    expect(seen).toEqual(range(100));
    expect(cancelled).toBe(true);
    expect(reasons[0]).toBeInstanceOf(ShutdownError);
    expect(String((reasons[0] as Error).message)).toContain('cancelled by the test');
    // A job this worker does not run is not cancelled here.
    expect(worker.cancelJob('no-such-job')).toBe(false);
  });
});

describe('a handler that throws because ctx.signal fired', () => {
  it('is a stop, not a failure: the slice comes back, no retry is counted, and the key resumes at once', async () => {
    const seen: string[] = [];
    let started!: () => void;
    const running = new Promise<void>((r) => (started = r));
    const errors: unknown[] = [];
    let first = true;
    const b = testBatcher({
      attempts: 1, // one counted failure would fail the job
      logger: { error: (_m, meta) => void errors.push(meta) },
      async eachIteration(ids, ctx) {
        if (first) {
          first = false;
          started();
          await new Promise<void>((resolve) => ctx.signal.addEventListener('abort', () => resolve(), { once: true }));
          ctx.signal.throwIfAborted();
        }
        seen.push(...ids);
      },
    });
    const worker = b.createWorker();
    await b.performBatchLater(['a', 'b'], { key: 'k' });
    await running;
    await worker.close();
    expect(await b.backlog('k')).toEqual({ pending: 2, inFlight: 0, retrying: 0 });
    b.createWorker();
    await waitFor(() => seen.length === 2);
    expect(seen).toEqual(['a', 'b']);
    expect(errors).toEqual([]);
  });
});

describe('worker.close() during a retry of a failed slice', () => {
  it('gives the slice back to the retry set with its history: the next run is still its second attempt', async () => {
    const attempts: number[] = [];
    let signalled!: () => void;
    const inSecondAttempt = new Promise<void>((resolve) => (signalled = resolve));
    const b = testBatcher({
      backoff: { type: 'fixed', delayMs: 1 },
      async eachIteration(_ids, ctx) {
        attempts.push(ctx.attempt);
        if (attempts.length === 1) throw new Error('first run fails');
        if (attempts.length === 2) {
          signalled();
          // Gives up when the worker closes: a stop, not a failure.
          await new Promise((_, reject) => ctx.signal.addEventListener('abort', () => reject(ctx.signal.reason as Error)));
        }
      },
    });
    const first = b.createWorker();
    await b.performBatchLater(['x'], { key: 'k' });
    await inSecondAttempt;
    await first.close();
    expect(await b.backlog('k')).toEqual({ pending: 0, inFlight: 0, retrying: 1 });
    b.createWorker();
    await waitFor(() => attempts.length === 3);
    expect(attempts).toEqual([1, 2, 2]);
  });
});
