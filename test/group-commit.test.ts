import { Redis } from 'ioredis';
import { describe, expect, it, vi } from 'vitest';
import { batchByKey, InvalidOptionError, KeyBacklogFullError, WrongTypeError, type Batcher } from '../src';
import { FORCE_EVALSHA_ENV } from '../src/storage/scripts';
import { isolatedRedis, keyspaceOf, onCluster, range, Recorder, testBatcher, track, uniqueName, waitFor } from './helpers/redis';

/**
 * Group commit (pushesPerCall, pushLingerMs): pushes that arrive while a push call is in flight
 * share the next call, each with its own outcome. Script calls are counted on a Redis of this
 * file's own (INFO commandstats), standalone only; what each push stored is checked on any.
 */
const server = isolatedRedis();
const standaloneOnly = it.skipIf(onCluster());

/** Our script calls (FCALL; EVALSHA or EVAL when forced) while `run` ran, less the first push's store check (agree.lua). */
async function scriptCalls(run: () => Promise<unknown>): Promise<number> {
  const admin = track(new Redis(server().url));
  await admin.config('RESETSTAT');
  await run();
  const counts: Record<string, number> = {};
  for (const [, name, calls] of (await admin.info('commandstats')).matchAll(/^cmdstat_([^:]+):calls=(\d+)/gm))
    counts[name!] = Number(calls);
  return (counts.fcall ?? 0) + (counts.evalsha ?? 0) + (counts.eval ?? 0) - (counts.hsetnx ?? 0);
}

const isolated = (
  options: { pushesPerCall?: number; pushLingerMs?: number; pushTimeoutMs?: number; maxPendingPerKey?: number } = {},
  rec = new Recorder(),
) => track(batchByKey({ name: uniqueName(), connection: server().url, eachIteration: rec.handler, ...options }));

/** 200 single-id pushes at once, each to its own key, every other one tracked. */
async function pushMany(b: Batcher): Promise<{ tickets: string[] }> {
  const results = await Promise.all(range(200).map((id, i) => b.performBatchLater([`id-${id}`], { key: `k-${id}`, track: i % 2 === 0 })));
  return { tickets: results.flatMap((r) => (r.ticket ? [r.ticket] : [])) };
}

describe('group commit', () => {
  standaloneOnly('200 concurrent pushes to 200 keys go out in a few script calls; every id runs once, every ticket settles', async () => {
    const rec = new Recorder();
    const b = isolated({}, rec);
    // The store check and script loading, once per process, before the pushes counted.
    await b.performBatchLater(['warm'], { key: 'warm' });
    let tickets: string[] = [];
    const calls = await scriptCalls(async () => ({ tickets } = await pushMany(b)));
    // The first goes alone; the 199 that arrive while it is in flight share the next (pushesPerCall 100: two).
    expect(calls).toBeLessThanOrEqual(4);
    b.createWorker({ concurrency: 16 });
    await waitFor(() => rec.all.length === 201, { what: 'every pushed id' });
    expect(rec.all.filter((id) => id !== 'warm').sort()).toEqual(range(200, 'id-').sort());
    expect(tickets).toHaveLength(100);
    for (const ticket of tickets) expect(await b.waitFor(ticket, { timeoutMs: 10_000 })).toMatchObject({ total: 1, done: 1, failed: 0 });
  });

  standaloneOnly('forced to EVALSHA (as on Redis 6.2), concurrent pushes share calls the same way', async () => {
    vi.stubEnv(FORCE_EVALSHA_ENV, '1');
    try {
      const rec = new Recorder();
      const client = track(new Redis(server().port, { maxRetriesPerRequest: null }));
      const b = track(batchByKey({ name: uniqueName(), connection: client, eachIteration: rec.handler }));
      await b.performBatchLater(['warm'], { key: 'warm' });
      const calls = await scriptCalls(() => pushMany(b));
      expect(calls).toBeLessThanOrEqual(4);
      b.createWorker({ concurrency: 16 });
      await waitFor(() => rec.all.length === 201, { what: 'every pushed id' });
    } finally {
      vi.unstubAllEnvs();
    }
  });

  standaloneOnly('a call carries at most pushesPerCall pushes', async () => {
    const b = isolated({ pushesPerCall: 10 });
    await b.performBatchLater(['warm'], { key: 'warm' });
    const calls = await scriptCalls(() => Promise.all(range(100).map((i) => b.performBatchLater([String(i)], { key: `k-${i}` }))));
    expect(calls).toBeGreaterThanOrEqual(10);
  });

  standaloneOnly('with pushLingerMs, pushes to an idle connection wait for one another and share one call', async () => {
    const b = isolated({ pushLingerMs: 200 });
    await b.performBatchLater(['warm'], { key: 'warm' });
    const calls = await scriptCalls(() => Promise.all(range(20).map((i) => b.performBatchLater([String(i)], { key: `k-${i}` }))));
    expect(calls).toBe(1);
    const pending = keyspaceOf(b).forKey('k-7').pending;
    expect(await track(new Redis(server().url)).lrange(pending, 0, -1)).toEqual(['7']);
  });

  standaloneOnly('a push lingering for others when the batcher closes goes out before its connection closes', async () => {
    const b = isolated({ pushLingerMs: 60_000, pushTimeoutMs: 120_000, pushesPerCall: 2 });
    // A full call goes at once: the connection and the store check are ready after it.
    await Promise.all(['a', 'b'].map((key) => b.performBatchLater([key], { key })));
    const pushing = b.performBatchLater(['late'], { key: 'k' });
    await b.close();
    await expect(pushing).resolves.toMatchObject({ pushed: 1 });
    expect(await track(new Redis(server().url)).lrange(keyspaceOf(b).forKey('k').pending, 0, -1)).toEqual(['late']);
  });

  standaloneOnly("each push of a shared call has its own outcome: one refused for its key's backlog, one refused by Redis", async () => {
    const rec = new Recorder();
    const b = isolated({ maxPendingPerKey: 1, pushLingerMs: 200 }, rec);
    const admin = track(new Redis(server().url));
    await b.performBatchLater(['already'], { key: 'full' });
    // A key whose pending list is a string: Redis refuses that push's first write (WRONGTYPE).
    await admin.set(keyspaceOf(b).forKey('wrong').pending, 'not a list');
    const outcomes: PromiseSettledResult<unknown>[] = [];
    const calls = await scriptCalls(async () => {
      outcomes.push(
        ...(await Promise.allSettled([
          b.performBatchLater(['more'], { key: 'full' }),
          b.performBatchLater(['w'], { key: 'wrong' }),
          ...range(10).map((i) => b.performBatchLater([`ok-${i}`], { key: `ok-${i}` })),
        ])),
      );
    });
    expect(calls).toBe(1);
    const [full, wrong, ...rest] = outcomes;
    expect(full).toMatchObject({ status: 'rejected', reason: expect.any(KeyBacklogFullError) });
    expect(wrong).toMatchObject({ status: 'rejected', reason: expect.any(WrongTypeError) });
    expect(rest.every((o) => o.status === 'fulfilled')).toBe(true);
    // The refused pushes wrote nothing; the others stored theirs and run.
    expect(await admin.get(keyspaceOf(b).forKey('wrong').pending)).toBe('not a list');
    b.createWorker();
    await waitFor(() => rec.all.length === 11, { what: 'the accepted ids' });
    expect(rec.idsOf('full')).toEqual(['already']);
    expect(rec.all.sort()).toEqual(['already', ...range(10, 'ok-')].sort());
  });

  standaloneOnly.each([false, true])(
    'a shared call Redis refuses whole (OOM) rejects each of its pushes with that error, none stored (EVALSHA: %s)',
    async (evalsha) => {
      if (evalsha) vi.stubEnv(FORCE_EVALSHA_ENV, '1');
      const admin = track(new Redis(server().url));
      try {
        const client = track(new Redis(server().port, { maxRetriesPerRequest: null }));
        const b = track(batchByKey({ name: uniqueName(), connection: client, eachIteration: () => {}, pushLingerMs: 100 }));
        await b.performBatchLater(['warm'], { key: 'warm' });
        await admin.config('SET', 'maxmemory', '1');
        const keys = range(5, 'oom-');
        const outcomes = await Promise.allSettled(keys.map((key) => b.performBatchLater([key], { key })));
        await admin.config('SET', 'maxmemory', '0');
        for (const outcome of outcomes) {
          expect(outcome).toMatchObject({ status: 'rejected', reason: { name: 'ReplyError', message: expect.stringMatching(/^OOM/) } });
        }
        for (const key of keys) expect(await admin.exists(keyspaceOf(b).forKey(key).pending)).toBe(0);
      } finally {
        await admin.config('SET', 'maxmemory', '0');
        vi.unstubAllEnvs();
      }
    },
  );

  it('concurrent pushes to a few keys (on a Cluster, of one slot each) store every id once, in each key its pushes', async () => {
    const rec = new Recorder();
    const b = testBatcher({ eachIteration: rec.handler });
    await Promise.all(range(300).map((id, i) => b.performBatchLater([`${i % 3}-${id}`], { key: `key-${i % 3}` })));
    b.createWorker({ concurrency: 4 });
    await waitFor(() => rec.all.length === 300, { what: 'every pushed id' });
    for (const k of range(3)) {
      expect(rec.idsOf(`key-${k}`).sort()).toEqual(
        range(300)
          .filter((i) => Number(i) % 3 === Number(k))
          .map((i) => `${k}-${i}`)
          .sort(),
      );
    }
  });

  it('refuses a pushesPerCall or pushLingerMs out of range, before connecting', () => {
    const make = (options: object) => () =>
      batchByKey({ name: uniqueName(), connection: 'redis://127.0.0.1:1', eachIteration: () => {}, ...options });
    expect(make({ pushesPerCall: 0 })).toThrow(InvalidOptionError);
    expect(make({ pushesPerCall: 1001 })).toThrow(/pushesPerCall/);
    expect(make({ pushLingerMs: -1 })).toThrow(/pushLingerMs/);
    expect(make({ pushLingerMs: 1.5 })).toThrow(InvalidOptionError);
  });
});
