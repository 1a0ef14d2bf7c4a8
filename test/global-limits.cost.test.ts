import { describe, expect, it } from 'vitest';
import { Redis } from 'ioredis';
import { batchByKey, type BatchByKeyOptions } from '../src';
import { isolatedRedis, onCluster, track, uniqueName } from './helpers/redis';

/**
 * A Redis of its own: SLOWLOG (every command logged) would mix in other test files' commands.
 * Standalone only, as the other command-count tests.
 */
const server = isolatedRedis();

/**
 * Every command Redis ran for one one-id key cycle (its push, its run, its completion) of a
 * warmed-up batcher, scripts' own commands included (SLOWLOG logs those too), as their arguments;
 * our script calls are named by script (`limits_enter`, say).
 */
async function oneIdCycle(options: Partial<BatchByKeyOptions>, ids = ['1']): Promise<string[][]> {
  const admin = track(new Redis(server().url));
  const b = track(batchByKey({ name: uniqueName('cost'), connection: server().url, ...options, eachIteration: () => {} }));
  const worker = b.createWorker();
  const cycle = async (key: string) => {
    const completed = new Promise<void>((resolve) => worker.once('completed', () => resolve()));
    await b.performBatchLater(key === 'warm' ? ['1'] : ids, { key });
    await completed;
  };
  // Warm up: the store check, the scripts' load, the worker's first fetch.
  await cycle('warm');
  await admin.config('SET', 'slowlog-max-len', '100000');
  await admin.config('SET', 'slowlog-log-slower-than', '0');
  await admin.slowlog('RESET');
  await cycle('k');
  await admin.config('SET', 'slowlog-log-slower-than', '10000');
  const entries = (await admin.slowlog('GET', 100_000)) as [number, number, number, string[]][];
  return entries
    .map((e) => e[3])
    .filter((args) => !['SLOWLOG', 'CONFIG'].includes(args[0]!.toUpperCase()))
    .map((args) =>
      args[0]!.toUpperCase() === 'FCALL' ? [args[1]!.replace(/^bbk_.*?_(?=[a-z]+(_[a-z]+)*$)/, ''), ...args.slice(2)] : args,
    );
}

/** The script calls among them, by name. */
const limitCalls = (commands: string[][]) => commands.map((c) => c[0]!).filter((name) => name.startsWith('limits_'));

describe.skipIf(onCluster())('the cost of batcher-wide limits', () => {
  it('a batcher without them sends no command for them; with them, a one-id run passes twice and leaves once', async () => {
    const without = await oneIdCycle({});
    expect(limitCalls(without)).toEqual([]);
    // Nor does anything read or write the limits' keys, or read the config hash on the way.
    expect(without.filter((args) => args.some((a) => a.includes(':limits') || a.endsWith(':bbk:config')))).toEqual([]);
    const limited = await oneIdCycle({ globalConcurrency: 4, globalRateLimit: { max: 1000, durationMs: 1000 } });
    // Before the first claim, before the claim that finds nothing, and the run's end.
    expect(limitCalls(limited).sort()).toEqual(['limits_enter', 'limits_enter', 'limits_leave']);
  });

  it('with them, a run makes one pass per claim and one leave: 25 ids in slices of 10 are 4 passes', async () => {
    const ids = Array.from({ length: 25 }, (_, i) => String(i));
    const limited = await oneIdCycle({ sliceSize: 10, globalConcurrency: 4, globalRateLimit: { max: 1000, durationMs: 1000 } }, ids);
    expect(limitCalls(limited).sort()).toEqual(['limits_enter', 'limits_enter', 'limits_enter', 'limits_enter', 'limits_leave']);
  });
});
