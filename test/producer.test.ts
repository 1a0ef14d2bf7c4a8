import { describe, expect, it } from 'vitest';
import { batchByKey, MissingHandlerError, StoreMismatchError } from '../src';
import { keysMatching, range, Recorder, testBatcher, testConnection, track, uniqueName, waitFor } from './helpers/redis';

describe('a producer: a batcher without eachIteration', () => {
  it('pushes and reads stats, and a worker defined elsewhere processes its ids', async () => {
    const name = uniqueName('producer');
    const producer = track(batchByKey({ name, connection: testConnection() }));
    await producer.performBatchLater(range(5), { key: 'a' });
    expect(await producer.backlog('a')).toEqual({ pending: 5, inFlight: 0, retrying: 0 });
    expect((await producer.stats()).pending).toBe(5);

    const rec = new Recorder();
    testBatcher({ name, eachIteration: rec.handler }).createWorker();
    await waitFor(() => rec.idsOf('a').length === 5, { what: 'the worker' });
    expect(rec.idsOf('a')).toEqual(range(5));
  });

  it('refuses to make a worker or a processor, with a MissingHandlerError', () => {
    const producer = track(batchByKey({ name: uniqueName('producer'), connection: testConnection() }));
    expect(() => producer.createWorker()).toThrow(MissingHandlerError);
    expect(() => producer.processor()).toThrow(/has no eachIteration/);
  });
});

describe('producers and workers on different stores', () => {
  it('a push with another store than the recorded one throws StoreMismatchError and writes nothing', async () => {
    const name = uniqueName('stores');
    const worker = testBatcher({ name, store: 'set', eachIteration: () => {} });
    await worker.performBatchLater(['x'], { key: 'a' });
    const producer = track(batchByKey({ name, connection: testConnection(), store: 'list' }));
    await expect(producer.performBatchLater(['y'], { key: 'b' })).rejects.toThrow(StoreMismatchError);
    await expect(producer.performBatchLater(['y'], { key: 'b' })).rejects.toThrow(
      /pushes with store 'list', but the batcher's producers and workers use 'set'/,
    );
    expect(await keysMatching(`*${name}*{b}*`)).toEqual([]);
  });

  it("a worker with another store than the pushers' touches nothing: its job fails and the ids stay", async () => {
    const name = uniqueName('stores');
    const producer = track(batchByKey({ name, connection: testConnection(), store: 'list' }));
    await producer.performBatchLater(range(3), { key: 'a' });
    const failures: unknown[] = [];
    const rec = new Recorder();
    const wrong = testBatcher({ name, store: 'set', eachIteration: rec.handler });
    const worker = wrong.createWorker();
    worker.on('failed', (_job, err) => failures.push(err));
    await waitFor(() => failures.length > 0, { what: 'the job to fail' });
    expect(failures[0]).toBeInstanceOf(StoreMismatchError);
    expect(rec.all).toEqual([]);
    expect(await producer.backlog('a')).toEqual({ pending: 3, inFlight: 0, retrying: 0 });
  });
});
