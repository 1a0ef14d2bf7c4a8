import { Queue, Worker } from 'bullmq';
import { describe, expect, it } from 'vitest';
import { Recorder, parseUrl, redisUrl, testBatcher, track, waitFor } from './helpers/redis';

describe('processor(): a BullMQ Worker you build yourself', () => {
  it('runs our key jobs, hands other job names to the fallback processor, and attach() wires shutdown', async () => {
    const rec = new Recorder();
    const b = testBatcher({ eachIteration: rec.handler });
    const others: string[] = [];
    const connection = { ...parseUrl(redisUrl()), maxRetriesPerRequest: null };
    const worker = track(
      new Worker(b.name, b.processor(async (job) => void others.push(`${job.name}:${JSON.stringify(job.data)}`)), { connection }),
    );
    b.attach(worker);
    const queue = track(new Queue(b.name, { connection }));
    await queue.add('send-email', { to: 'a@example.com' });
    await b.performBatchLater(['1', '2'], { key: 'k' });
    await waitFor(() => rec.all.length === 2 && others.length === 1);
    expect(others).toEqual(['send-email:{"to":"a@example.com"}']);
    expect(rec.idsOf('k')).toEqual(['1', '2']);
  });

  it('without a fallback, a foreign job fails with a message naming it', async () => {
    const b = testBatcher({ eachIteration: () => {} });
    const connection = { ...parseUrl(redisUrl()), maxRetriesPerRequest: null };
    const worker = track(new Worker(b.name, b.processor(), { connection }));
    b.attach(worker);
    const failed = new Promise<Error>((resolve) => worker.on('failed', (_job, err) => resolve(err)));
    await track(new Queue(b.name, { connection })).add('stranger', {});
    expect((await failed).message).toBe('batch-by-key: no processor for job name "stranger"');
  });
});
