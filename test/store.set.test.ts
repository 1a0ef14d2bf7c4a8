import { describe, expect, it } from 'vitest';
import { Recorder, testBatcher, waitFor } from './helpers/redis';

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
