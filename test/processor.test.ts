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
      new Worker(b.name, b.processor(async (job) => void others.push(`${job.name}:${JSON.stringify(job.data)}`)), bullOptions(b.name)),
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
