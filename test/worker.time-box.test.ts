import { describe, expect, it } from 'vitest';
import { range, Recorder, testBatcher, waitFor } from './helpers/redis';
import { sleep } from './helpers/time';

describe('time box: maxRuntimeMs', () => {
  it('with one worker slot, a key pushed later finishes before the first key is drained', async () => {
    const rec = new Recorder();
    const b = testBatcher({
      sliceSize: 10,
      maxRuntimeMs: 50,
      async eachIteration(ids, ctx) {
        rec.handler(ids, ctx);
        await sleep(3);
      },
    });
    b.createWorker({ concurrency: 1 });
    await b.performBatchLater(range(2000), { key: 'heavy' });
    await waitFor(() => rec.idsOf('heavy').length > 0, { what: 'heavy to start' });
    await b.performBatchLater(range(10, 'l1-'), { key: 'light-1' });
    await b.performBatchLater(range(10, 'l2-'), { key: 'light-2' });

    await waitFor(() => rec.idsOf('light-1').length === 10 && rec.idsOf('light-2').length === 10, { what: 'light keys' });
    expect(rec.idsOf('heavy').length).toBeLessThan(2000);
    expect((await b.backlog('heavy')).pending).toBeGreaterThan(0);

    await waitFor(() => rec.idsOf('heavy').length === 2000, { what: 'heavy to drain' });
    // Interrupted many times, the heavy key still saw its ids exactly once, in push order.
    expect(rec.idsOf('heavy')).toEqual(range(2000));
  });

  it('an interrupted key lines up behind keys already waiting', async () => {
    const order: string[] = [];
    const b = testBatcher({
      sliceSize: 10,
      maxRuntimeMs: 30,
      async eachIteration(_ids, ctx) {
        if (order.at(-1) !== ctx.key) order.push(ctx.key);
        await sleep(5);
      },
    });
    await b.performBatchLater(range(300), { key: 'a' });
    await b.performBatchLater(range(300), { key: 'b' });
    await b.performBatchLater(range(300), { key: 'c' });
    b.createWorker({ concurrency: 1 });
    await waitFor(
      async () =>
        (await b.backlog('a')).pending + (await b.backlog('b')).pending + (await b.backlog('c')).pending === 0 && order.length > 0,
    );
    // Round robin: a run of one key is always followed by another key while others wait.
    expect(order.slice(0, 6)).toEqual(['a', 'b', 'c', 'a', 'b', 'c']);
  });
});
