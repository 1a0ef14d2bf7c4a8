import { Queue, Worker, type ConnectionOptions } from 'bullmq';
import { describe, expect, it } from 'vitest';
import { prefixOf, Recorder, testBatcher, testConnection, track, waitFor } from './helpers/redis';

/** BullMQ options for a hand-built Worker or Queue on a test batcher's queue. */
const bullOptions = (name: string) => ({ connection: testConnection() as ConnectionOptions, prefix: prefixOf(name) });

describe('processor(): a BullMQ Worker you build yourself', () => {
  it('runs our key jobs, hands other job names to the fallback processor, and attach() wires shutdown', async () => {
    const rec = new Recorder();
    const b = testBatcher({ eachIteration: rec.handler });
    const others: string[] = [];
    const worker = track(
      new Worker(
        b.name,
        b.processor((job) => {
          others.push(`${job.name}:${JSON.stringify(job.data)}`);
          return Promise.resolve();
        }),
        bullOptions(b.name),
      ),
    );
    b.attach(worker);
    const queue = track(new Queue(b.name, bullOptions(b.name)));
    await queue.add('send-email', { to: 'a@example.com' });
    await b.performBatchLater(['1', '2'], { key: 'k' });
    await waitFor(() => rec.all.length === 2 && others.length === 1);
    expect(others).toEqual(['send-email:{"to":"a@example.com"}']);
    expect(rec.idsOf('k')).toEqual(['1', '2']);
  });

  it('without a fallback, a foreign job fails with a message naming it', async () => {
    const b = testBatcher({ eachIteration: () => {} });
    const worker = track(new Worker(b.name, b.processor(), bullOptions(b.name)));
    b.attach(worker);
    const failed = new Promise<Error>((resolve) => worker.on('failed', (_job, err) => resolve(err)));
    await track(new Queue(b.name, bullOptions(b.name))).add('stranger', {});
    expect((await failed).message).toBe('batch-by-key: no processor for job name "stranger"');
  });
});

describe('what a handler returns', () => {
  it('a promise of another realm (an async function from a vm context) is awaited: its rejection fails the slice', async () => {
    const { runInNewContext } = await import('node:vm');
    const wait = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
    // `instanceof Promise` is false for this realm's promises.
    const foreign = runInNewContext('(async (wait, call) => { await wait(20); if (call === 1) throw new Error("first call fails"); })') as (
      wait: (ms: number) => Promise<unknown>,
      call: number,
    ) => PromiseLike<void>;
    let calls = 0;
    const failed: unknown[] = [];
    const done: number[] = [];
    const b = testBatcher({ backoff: { type: 'fixed', delayMs: 10 }, eachIteration: () => foreign(wait, ++calls) });
    b.on('slice:failed', ({ error }) => void failed.push(error));
    b.on('slice:done', () => void done.push(calls));
    await b.performBatchLater(['1'], { key: 'k' });
    b.createWorker();
    await waitFor(() => done.length === 1, { what: 'the retried slice to succeed' });
    expect(calls).toBe(2);
    expect(failed).toHaveLength(1);
    expect((failed[0] as Error).message).toBe('first call fails');
  });

  it('a lazy thenable (a query builder that runs only when awaited) runs, and the slice ends when it settles', async () => {
    let finished = false;
    const events: string[] = [];
    const b = testBatcher({
      // As a query builder's: `then` starts the work and says nothing more of its types.
      eachIteration: () =>
        ({
          then(resolve: (value: unknown) => void) {
            events.push('then called');
            setTimeout(() => {
              finished = true;
              resolve(undefined);
            }, 20);
          },
        }) as PromiseLike<unknown>,
    });
    b.on('slice:done', () => void events.push(finished ? 'done after it settled' : 'done too early'));
    await b.performBatchLater(['1'], { key: 'k' });
    b.createWorker();
    await waitFor(() => events.length === 2, { what: 'the slice to end' });
    expect(events).toEqual(['then called', 'done after it settled']);
  });
});
