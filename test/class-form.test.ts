import { describe, expect, it } from 'vitest';
import { BatchByKey, type IterationContext } from '../src';
import { range, testConnection, track, uniqueName, waitFor } from './helpers/redis';

describe('class form: BatchByKey', () => {
  it('a subclass defines eachIteration; static performBatchLater/createWorker/backlog/stats/history/batcher/close work', async () => {
    const seen: string[] = [];
    class SegmentRefresher extends BatchByKey({
      name: uniqueName('cls'),
      connection: testConnection(),
      sliceSize: 4,
      history: { intervalMs: 100 },
    }) {
      readonly prefix = 'seg:';
      async eachIteration(ids: string[], ctx: IterationContext): Promise<void> {
        seen.push(...ids.map((id) => `${this.prefix}${ctx.key}:${id}`));
      }
    }
    track({ close: () => SegmentRefresher.close() });
    await SegmentRefresher.performBatchLater(range(10), { key: 'acct' });
    expect(await SegmentRefresher.backlog('acct')).toEqual({ pending: 10, inFlight: 0, retrying: 0 });
    expect(await SegmentRefresher.stats()).toMatchObject({ keys: 1, pending: 10 });
    expect(await SegmentRefresher.batcher.stats()).toMatchObject({ name: SegmentRefresher.batcher.name, pending: 10 });
    expect(await SegmentRefresher.history()).toMatchObject({ name: SegmentRefresher.batcher.name, samples: [] });
    SegmentRefresher.createWorker();
    await waitFor(() => seen.length === 10);
    expect(seen).toEqual(range(10).map((i) => `seg:acct:${i}`));
    // Its worker samples like any other.
    await waitFor(async () => (await SegmentRefresher.history()).samples.length > 0, { what: 'a sample' });
  });

  it('two subclasses of one definition get separate batchers', async () => {
    const name = uniqueName('cls');
    const Base = BatchByKey({ name, connection: testConnection() });
    class A extends Base {
      eachIteration(): void {}
    }
    class B extends Base {
      eachIteration(): void {}
    }
    track({ close: () => A.close() });
    track({ close: () => B.close() });
    await A.performBatchLater(['1'], { key: 'k' });
    // Same name, same Redis namespace: B sees what A pushed.
    expect(await B.backlog('k')).toEqual({ pending: 1, inFlight: 0, retrying: 0 });
    expect(await A.recover()).toBe(0);
  });
});
