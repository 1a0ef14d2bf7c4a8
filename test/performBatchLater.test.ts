import { describe, expect, it } from 'vitest';
import { Redis } from 'ioredis';
import { withKey } from '../src';
import { range, Recorder, redisClient, redisUrl, testBatcher, track, waitFor } from './helpers/redis';

/** The commands Redis executed that mention `needle` while `run` ran, seen through MONITOR. */
async function monitorCommands(needle: string, run: () => Promise<unknown>): Promise<string[][]> {
  const monitor = await track(new Redis(redisUrl())).monitor();
  const seen: string[][] = [];
  let done = false;
  const marker = `end-of-${needle}`;
  monitor.on('monitor', (_time: string, args: string[]) => {
    if (args.includes(marker)) done = true;
    else if (args.some((a) => a.includes(needle))) seen.push(args);
  });
  await run();
  // Redis runs commands in order, so once MONITOR shows this marker it has shown everything before.
  await redisClient().echo(marker);
  await waitFor(() => done, { what: 'the MONITOR marker' });
  monitor.disconnect();
  return seen;
}

describe('performBatchLater', () => {
  it('processes every pushed id of a key, in push order, in slices of sliceSize', async () => {
    const rec = new Recorder();
    const b = testBatcher({ eachIteration: rec.handler, sliceSize: 10 });
    b.createWorker();
    await b.performBatchLater(range(95), { key: 'acct-1' });
    await waitFor(() => rec.all.length === 95);
    expect(rec.idsOf('acct-1')).toEqual(range(95));
    expect(rec.calls.map((c) => c.ids.length)).toEqual([10, 10, 10, 10, 10, 10, 10, 10, 10, 5]);
  });

  it('stringifies finite numbers and returns the key and count', async () => {
    const rec = new Recorder();
    const b = testBatcher({ eachIteration: rec.handler });
    const result = await b.performBatchLater([1, 2.5, -3, 'x'], { key: 'k' });
    expect(result).toEqual({ key: 'k', pushed: 4 });
    b.createWorker();
    await waitFor(() => rec.all.length === 4);
    expect(rec.all).toEqual(['1', '2.5', '-3', 'x']);
  });

  it('treats an empty array as a no-op: nothing is written to Redis', async () => {
    const b = testBatcher({ eachIteration: () => {} });
    expect(await b.performBatchLater([], { key: 'k' })).toEqual({ key: 'k', pushed: 0 });
    expect(await redisClient().keys(`*${b.name}*`)).toEqual([]);
  });

  it('pushes 5,000 ids in chunked commands, never one command per id', async () => {
    const b = testBatcher({ eachIteration: () => {} });
    const commands = await monitorCommands(b.name, () => b.performBatchLater(range(5000), { key: 'bulk' }));
    const pushes = commands.filter(([cmd]) => cmd?.toLowerCase() === 'rpush');
    expect(pushes).toHaveLength(5);
    expect(pushes.reduce((n, args) => n + args.length - 2, 0)).toBe(5000);
    expect(await b.backlog('bulk')).toEqual({ pending: 5000, inFlight: 0 });
  });

  it('takes the key from the options resolver, then from withKey, explicit key first', async () => {
    const rec = new Recorder();
    let resolved: string | undefined = 'from-resolver';
    const b = testBatcher({ eachIteration: rec.handler, key: () => resolved });
    expect((await b.performBatchLater(['a'])).key).toBe('from-resolver');
    resolved = undefined;
    expect((await withKey('from-context', () => b.performBatchLater(['b']))).key).toBe('from-context');
    expect((await withKey('from-context', () => b.performBatchLater(['c'], { key: 'explicit' }))).key).toBe('explicit');
    b.createWorker();
    await waitFor(() => rec.all.length === 3);
    expect(rec.idsOf('from-resolver')).toEqual(['a']);
    expect(rec.idsOf('from-context')).toEqual(['b']);
    expect(rec.idsOf('explicit')).toEqual(['c']);
  });

  it('accepts an async key resolver', async () => {
    const b = testBatcher({ eachIteration: () => {}, key: async () => 'async-key' });
    expect((await b.performBatchLater(['a'])).key).toBe('async-key');
    expect(await b.backlog('async-key')).toEqual({ pending: 1, inFlight: 0 });
  });
});
