import { describe, expect, it } from 'vitest';
import { range, Recorder, testBatcher, waitFor } from './helpers/redis';

describe('push while the key job completes (no lost wakeup)', () => {
  it('processes every id pushed at any moment, without another push', async () => {
    const rec = new Recorder();
    const b = testBatcher({ eachIteration: rec.handler, sliceSize: 3 });
    b.createWorker({ concurrency: 4 });
    // Pushes land while the previous job claims, finds the key empty and completes.
    for (const i of range(400)) {
      await b.performBatchLater([i], { key: 'racy' });
      if (Number(i) % 3 === 0) await new Promise((r) => setImmediate(r));
    }
    await waitFor(() => rec.all.length >= 400, { what: '400 ids', timeoutMs: 30_000 });
    expect(rec.idsOf('racy')).toEqual(range(400));
    expect(await b.backlog('racy')).toEqual({ pending: 0, inFlight: 0, retrying: 0 });
  });

  it('hits the window where the job has found the key empty but not yet completed', async () => {
    const rec = new Recorder();
    const b = testBatcher({ eachIteration: rec.handler });
    b.createWorker();
    // Each push waits for the previous id to be processed, then pushes at once: the job is
    // then between its last (empty) claim and its completion, the window of the original design.
    for (let i = 0; i < 300; i++) {
      await b.performBatchLater([String(i)], { key: 'window' });
      await waitFor(() => rec.all.length === i + 1, { intervalMs: 1, what: `id ${i}` });
    }
    expect(rec.all).toEqual(range(300));
  });
});
