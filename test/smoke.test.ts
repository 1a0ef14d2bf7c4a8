import { describe, expect, it } from 'vitest';
import { range, Recorder, testBatcher, waitFor } from './helpers/redis';

describe('smoke', () => {
  it('processes pushed ids', async () => {
    const rec = new Recorder();
    const b = testBatcher({ eachIteration: rec.handler, sliceSize: 10 });
    b.createWorker();
    await b.performBatchLater(range(95), { key: 'acct-1' });
    await waitFor(() => rec.all.length === 95);
    expect(rec.idsOf('acct-1')).toEqual(range(95));
  });
});
