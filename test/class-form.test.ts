import { describe, expect, expectTypeOf, it } from 'vitest';
import { BatchByKey, type Batcher, type IterationContext, type PushItem } from '../src';
import { range, testConnection, track, uniqueName, waitFor } from './helpers/redis';

/** A type's methods, worked out here rather than taken from src/class-form.ts, so the test does not grade itself. */
type MethodsOf<T> = { [K in keyof T as T[K] extends (...args: never[]) => unknown ? K : never]: T[K] };

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
      eachIteration(ids: string[], ctx: IterationContext): void {
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

  it('has every method of a batcher as a static, typed as the batcher types it (the type-level half)', () => {
    class Job extends BatchByKey({ name: 'types-only', connection: testConnection() }) {
      eachIteration(): void {}
    }
    expectTypeOf<Pick<typeof Job, keyof MethodsOf<Batcher>>>().toEqualTypeOf<MethodsOf<Batcher>>();
    expectTypeOf(Job.openTicket).toEqualTypeOf<Batcher['openTicket']>();
    expectTypeOf(Job.deadLetters).toEqualTypeOf<Batcher['deadLetters']>();
    expectTypeOf(Job.batcher).toEqualTypeOf<Batcher>();
    // Typed data, as batchByKey<Data> takes it: a push of { id, data } is held to it.
    class Typed extends BatchByKey<{ n: number }>({ name: 'types-only', connection: testConnection() }) {
      eachIteration(_ids: string[], ctx: IterationContext<{ n: number }>): void {
        expectTypeOf(ctx.data('1')).toEqualTypeOf<{ n: number } | undefined>();
      }
    }
    expectTypeOf(Typed.performBatchLater).parameter(0).toEqualTypeOf<ReadonlyArray<PushItem<{ n: number }>>>();
    expectTypeOf(Typed.batcher).toEqualTypeOf<Batcher<{ n: number }>>();
  });

  it('has every method of a batcher as a static at run time, each serving the calling subclass', () => {
    class Job extends BatchByKey({ name: uniqueName('cls'), connection: testConnection() }) {
      eachIteration(): void {}
    }
    track({ close: () => Job.close() });
    const methods = Object.entries(Job.batcher)
      .filter(([, value]) => typeof value === 'function')
      .map(([name]) => name)
      .sort();
    expect(methods.length).toBeGreaterThan(15);
    const statics = Object.getOwnPropertyNames(Object.getPrototypeOf(Job) as object).filter(
      (name) => typeof (Job as unknown as Record<string, unknown>)[name] === 'function',
    );
    expect(statics.sort()).toEqual(methods);
    // on/off return the batcher, as the function form's do, so calls chain.
    const listener = () => {};
    expect(Job.on('pushed', listener)).toBe(Job.batcher);
    expect(Job.off('pushed', listener)).toBe(Job.batcher);
  });

  it('open tickets and data per id work through the statics', async () => {
    const seen: [string, unknown][] = [];
    class Importer extends BatchByKey<{ row: number }>({ name: uniqueName('cls'), connection: testConnection(), store: 'set' }) {
      eachIteration(ids: string[], ctx: IterationContext<{ row: number }>): void {
        for (const id of ids) seen.push([id, ctx.data(id)]);
      }
    }
    track({ close: () => Importer.close() });
    const ticket = await Importer.openTicket('acct');
    await Importer.performBatchLater([{ id: 'a', data: { row: 1 } }], { key: 'acct', ticket });
    await Importer.performBatchLater([{ id: 'b', data: { row: 2 } }], { key: 'acct', ticket });
    await Importer.sealTicket(ticket);
    Importer.createWorker();
    expect(await Importer.waitFor(ticket)).toMatchObject({ total: 2, done: 2, failed: 0 });
    expect(seen.sort()).toEqual([
      ['a', { row: 1 }],
      ['b', { row: 2 }],
    ]);
  });
});
