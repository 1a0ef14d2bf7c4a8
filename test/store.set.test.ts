import { describe, expect, it } from 'vitest';
import { Gate } from './helpers/gate';
import { range, Recorder, testBatcher, waitFor } from './helpers/redis';
import { sleep } from './helpers/time';

describe("store: 'set'", () => {
  it('collapses duplicate pending ids', async () => {
    const rec = new Recorder();
    const b = testBatcher({ store: 'set', eachIteration: rec.handler });
    await b.performBatchLater(['a', 'a', 'b'], { key: 'k' });
    await b.performBatchLater(['b', 'c', 1, '1'], { key: 'k' });
    expect(await b.backlog('k')).toEqual({ pending: 4, inFlight: 0, retrying: 0 });
    b.createWorker();
    await waitFor(() => rec.all.length >= 4);
    expect(rec.all.sort()).toEqual(['1', 'a', 'b', 'c']);
  });

  it('processes an id again when it is re-added while its slice runs', async () => {
    const seen: string[] = [];
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    let started!: () => void;
    const running = new Promise<void>((r) => (started = r));
    const b = testBatcher({
      store: 'set',
      async eachIteration(ids) {
        seen.push(...ids);
        if (seen.length === 1) {
          started();
          await gate;
        }
      },
    });
    b.createWorker();
    await b.performBatchLater(['x'], { key: 'k' });
    await running;
    await b.performBatchLater(['x'], { key: 'k' });
    release();
    await waitFor(() => seen.length === 2);
    expect(seen).toEqual(['x', 'x']);
  });
});

describe("store: 'set', lag of ids pushed after a slice took exactly the rest", () => {
  for (const priority of ['normal', 'high'] as const) {
    it(`dates them from their own push, not from the ids before them (${priority})`, async () => {
      const started = new Gate();
      const release = new Gate();
      const b = testBatcher({
        store: 'set',
        sliceSize: 5,
        async eachIteration() {
          started.open();
          await release.opened;
        },
      });
      const first = Date.now();
      await b.performBatchLater(range(5), { key: 'k', priority });
      b.createWorker();
      await started.opened;
      // The slice holds all five: the level's pending is empty while it runs. Time passes (not a
      // wait for anything), so a mark the five left behind would show as an old id.
      await sleep(400);
      await b.performBatchLater(['late'], { key: 'k', priority });
      const { oldestPendingAgeMs } = await b.stats();
      release.open();
      expect(oldestPendingAgeMs).toBeLessThan(Math.min(300, Date.now() - first - 100));
    });
  }
});
