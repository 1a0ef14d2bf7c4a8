import { describe, expect, it } from 'vitest';
import { Redis } from 'ioredis';
import { Queue, QueueKeys } from 'bullmq';
import { batchByKey, withKey } from '../src';
import { WAIT_LIST, type KeyQueue } from '../src/storage/job';
import { pushAdd, queuePrefixOf } from '../src/storage/key-job';
import { addKeysDerivable } from '../src/bullmq';
import {
  isolatedRedis,
  keysMatching,
  keyspaceOf,
  onCluster,
  queueOf,
  range,
  Recorder,
  redisClient,
  testBatcher,
  track,
  uniqueName,
  waitFor,
} from './helpers/redis';

/**
 * A Redis of its own, so command counts are not mixed with other test files' commands. The counts
 * are those of the standalone push (one script call that also probes the job); a Cluster push
 * writes the index and adds the job separately.
 */
const server = isolatedRedis();
const standaloneOnly = it.skipIf(onCluster());

/** How many times Redis ran each command while `run` ran (INFO commandstats). */
async function commandCounts(run: () => Promise<unknown>): Promise<Record<string, number>> {
  const admin = track(new Redis(server().url));
  await admin.config('RESETSTAT');
  await run();
  const info = await admin.info('commandstats');
  const counts: Record<string, number> = {};
  for (const [, name, calls] of info.matchAll(/^cmdstat_([^:]+):calls=(\d+)/gm)) counts[name!] = Number(calls);
  // Our scripts are FCALLs on Redis 7 (BullMQ's stay EVALSHAs); a script's first call on a
  // connection may be an EVAL (after NOSCRIPT): each is one script call.
  // A process's first push checks the recorded store first (agree.lua, whose one HSETNX counts it):
  // a check once per recoveryIntervalMs, no part of the push.
  counts.scripts = (counts.fcall ?? 0) + (counts.evalsha ?? 0) + (counts.eval ?? 0) - (counts.hsetnx ?? 0);
  return counts;
}

const isolatedQueue = (b: { name: string }) => track(new Queue(b.name, { connection: { host: '127.0.0.1', port: server().port } }));
const isolatedBatcher = () => track(batchByKey({ name: uniqueName(), connection: server().url, eachIteration: () => {} }));

describe('performBatchLater', () => {
  it('a key that gains an extra takes the general path, and the plain one again once it has none (push.lua plainPush)', async () => {
    const rec = new Recorder();
    const b = testBatcher({ eachIteration: rec.handler });
    const queue = queueOf(b);
    const liveJobs = async () => (await queue.getJobs(['waiting', 'prioritized', 'delayed'])).length;
    // Plain: the push adds the key's job; a second push finds it waiting and adds none.
    await b.performBatchLater(['1'], { key: 'k' });
    await b.performBatchLater(['2'], { key: 'k' });
    expect(await liveJobs()).toBe(1);
    // An extra (a pause until resumed): a push to it adds no job (the resume will).
    await queue.obliterate({ force: true });
    await b.pause('k');
    expect(await redisClient().exists(keyspaceOf(b).forKey('k').extras)).toBe(1);
    await b.performBatchLater(['3'], { key: 'k' });
    expect(await liveJobs()).toBe(0);
    await b.resume('k');
    expect(await liveJobs()).toBe(1);
    b.createWorker();
    await waitFor(() => rec.all.length === 3, { what: 'the resumed key to run' });
    // Its last extra gone (the run drops the mark with the pause's), the next push is plain again.
    await waitFor(async () => (await redisClient().exists(keyspaceOf(b).forKey('k').extras)) === 0, { what: 'the extras mark to go' });
    await b.performBatchLater(['4'], { key: 'k' });
    await waitFor(() => rec.all.length === 4, { what: 'the plain push to run' });
    expect(rec.idsOf('k')).toEqual(['1', '2', '3', '4']);
  });

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
    expect(await keysMatching(`*${b.name}*`)).toEqual([]);
  });

  standaloneOnly('pushes 5,000 ids by native RPUSHes of 1,000 in one MULTI with its script, never one command per id', async () => {
    const b = isolatedBatcher();
    await b.performBatchLater(['warm-up'], { key: 'other' }); // connections and scripts, outside the count
    const counts = await commandCounts(() => b.performBatchLater(range(5000), { key: 'bulk' }));
    expect(counts.rpush).toBe(6); // 5 chunks of ids, and the push's one lag mark (scripts count their commands)
    expect(counts.exec).toBe(1); // the index, the ids and the push script, in one transaction
    expect(counts.scripts).toBe(2); // our push, and BullMQ's add of the new key's job (at the heavy level)
    expect(await b.backlog('bulk')).toEqual({ pending: 5000, inFlight: 0, retrying: 0 });
  });

  it.skipIf(onCluster()).each([
    ['a bulk push', 1000],
    ['a push of a few ids', 3],
  ])('%s to a key of the wrong type rejects with Redis’s error and stores nothing of it', async (_, size) => {
    const redis = track(new Redis(server().url));
    const b = isolatedBatcher();
    await b.performBatchLater(['warm-up'], { key: 'other' }); // the client runs its scripts as functions from here
    const names = keyspaceOf(b).forKey('k');
    await redis.set(names.pending, 'a string, so RPUSH fails');
    await expect(b.performBatchLater(range(size), { key: 'k' })).rejects.toThrow(/WRONGTYPE/);
    expect(await redis.exists(names.pushMarks)).toBe(0);
    expect(await redis.get(names.pending)).toBe('a string, so RPUSH fails');
    const jobs = await isolatedQueue(b).getJobs(['waiting', 'prioritized', 'delayed']);
    expect(jobs.map((job) => (job.data as { key: string }).key)).toEqual(['other']);
  });

  standaloneOnly('adds a new light key’s job in the push’s own call: one script call in all', async () => {
    const rec = new Recorder();
    const b = track(batchByKey({ name: uniqueName(), connection: server().url, eachIteration: rec.handler }));
    const counts = await commandCounts(() => b.performBatchLater(['1', '2'], { key: 'fresh' }));
    expect(counts.scripts).toBe(1); // push.lua ran BullMQ's addStandardJob inside
    expect(await isolatedQueue(b).getJobCounts('waiting', 'prioritized', 'delayed')).toEqual({ waiting: 1, prioritized: 0, delayed: 0 });
    // The job is BullMQ's own, as its add makes it: a worker runs it.
    b.createWorker();
    await waitFor(() => rec.all.length === 2, { what: 'both ids' });
    expect(rec.idsOf('fresh')).toEqual(['1', '2']);
  });

  standaloneOnly.each(['list', 'set'] as const)(
    'adds the delayed job of an idle key that waits to fill in the push’s own call (%s): one script call, and it runs at maxWaitMs',
    async (store) => {
      const rec = new Recorder();
      const maxWaitMs = 800;
      const b = track(
        batchByKey({ name: uniqueName(), connection: server().url, store, minSliceSize: 5, maxWaitMs, eachIteration: rec.handler }),
      );
      await b.performBatchLater(['warm-up'], { key: 'other' }); // connections and scripts, outside the count
      const pushedAt = Date.now();
      const counts = await commandCounts(() => b.performBatchLater(['1', '2'], { key: 'idle' }));
      expect(counts.scripts).toBe(1); // push.lua ran BullMQ's addDelayedJob inside
      const delayed = await isolatedQueue(b).getDelayed();
      expect(delayed.map((job) => job.data as unknown)).toContainEqual({ key: 'idle' });
      // The next push of the wait finds the job due by then: one call too, and no second job.
      expect((await commandCounts(() => b.performBatchLater(['3'], { key: 'idle' }))).scripts).toBe(1);
      expect((await isolatedQueue(b).getDelayed()).filter((job) => (job.data as { key: string }).key === 'idle')).toHaveLength(1);
      b.createWorker();
      await waitFor(() => rec.idsOf('idle').length === 3, { what: 'the key once its wait ends' });
      const slice = rec.calls.find((c) => c.key === 'idle')!;
      expect(slice.at - pushedAt).toBeGreaterThanOrEqual(maxWaitMs - 5);
      expect(slice.at - pushedAt).toBeLessThan(maxWaitMs + 5_000);
      expect([...slice.ids].sort()).toEqual(['1', '2', '3']);
    },
  );

  standaloneOnly(
    'sends two key names (the key’s base and the index), and derives BullMQ’s as the installed BullMQ names them',
    async () => {
      const b = isolatedBatcher();
      const queue = isolatedQueue(b) as unknown as KeyQueue;
      // If BullMQ ever names these otherwise, pushes take the two-call path (test below): this says what moved.
      const prefix = queuePrefixOf(queue);
      expect(prefix, 'BullMQ names its de:/active/delayed keys as push.lua derives them').toBe(queue.toKey(''));
      for (const [kind, delayMs] of [
        ['standard', 0],
        ['delayed', 1000],
      ] as const) {
        const add = pushAdd(queue, 'k', delayMs, WAIT_LIST);
        expect(add?.kind, `BullMQ's add with a delay of ${delayMs} ms is its ${kind} add, with the keys push.lua derives`).toBe(kind);
        expect(add && addKeysDerivable(add, prefix!), `BullMQ's ${kind} add's keys are PUSH_ADD_KEYS.${kind} under its prefix`).toBe(true);
        await add?.done(null);
      }
      const admin = track(new Redis(server().url));
      await admin.config('SET', 'slowlog-log-slower-than', '0');
      await admin.slowlog('RESET');
      await b.performBatchLater(['1'], { key: 'fresh' });
      const log = (await admin.slowlog('GET', -1)) as [number, number, number, string[]][];
      await admin.config('SET', 'slowlog-log-slower-than', '10000');
      const pushes = log.filter(([, , , args]) => /^(eval|fcall)/i.test(args[0]!) && String(args[3]).includes(':bbk:{fresh}'));
      expect(pushes.map(([, , , args]) => Number(args[2]))).toEqual([2]);
      expect(await isolatedQueue(b).getWaitingCount()).toBe(1);
    },
  );

  standaloneOnly('a BullMQ that names its keys otherwise gets the two-call push: ids stored, then its job added, and run', async () => {
    const rec = new Recorder();
    const b = track(batchByKey({ name: uniqueName(), connection: server().url, eachIteration: rec.handler }));
    // What a future BullMQ could do: its delayed set under another name (a queue's keys are made
    // once, by QueueKeys, when the batcher's queue is made at its first push).
    // eslint-disable-next-line @typescript-eslint/unbound-method -- kept to be called with .call(this) below and put back after
    const getKeys = QueueKeys.prototype.getKeys;
    QueueKeys.prototype.getKeys = function (this: QueueKeys, name: string) {
      const keys = getKeys.call(this, name);
      return { ...keys, delayed: `${keys.delayed}-v2` };
    };
    try {
      const counts = await commandCounts(() => b.performBatchLater(['1', '2'], { key: 'k' }));
      expect(counts.scripts).toBe(2); // our push, then BullMQ's add on its own
      expect(counts.zadd).toBeGreaterThanOrEqual(1); // the index, written first as on a Cluster
    } finally {
      QueueKeys.prototype.getKeys = getKeys;
    }
    b.createWorker();
    await waitFor(() => rec.all.length === 2, { what: 'both ids' });
    expect(rec.idsOf('k')).toEqual(['1', '2']);
  });

  standaloneOnly('adds no job when the key job is waiting: one call per push', async () => {
    const b = isolatedBatcher();
    await b.performBatchLater(['first'], { key: 'k' });
    const counts = await commandCounts(async () => {
      await b.performBatchLater(['second'], { key: 'k' });
      await b.performBatchLater(['third'], { key: 'k' });
    });
    expect(counts.scripts).toBe(2); // our push script, once per push; BullMQ's add would be a third
    expect(counts.exec).toBeUndefined();
    expect(await b.backlog('k')).toEqual({ pending: 3, inFlight: 0, retrying: 0 });
  });

  standaloneOnly("adds no job while a run holds the key's lock (its next claim sees the ids)", async () => {
    const b = isolatedBatcher();
    const names = keyspaceOf(b).forKey('k');
    const admin = track(new Redis(server().url));
    await admin.set(names.lock, 'a run', 'PX', 60_000);
    const counts = await commandCounts(() => b.performBatchLater(['1'], { key: 'k' }));
    expect(counts.scripts).toBe(1);
    expect(await isolatedQueue(b).getJobCounts('waiting', 'prioritized', 'delayed')).toEqual({ waiting: 0, prioritized: 0, delayed: 0 });
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
    const b = testBatcher({ eachIteration: () => {}, key: () => Promise.resolve('async-key') });
    expect((await b.performBatchLater(['a'])).key).toBe('async-key');
    expect(await b.backlog('async-key')).toEqual({ pending: 1, inFlight: 0, retrying: 0 });
  });
});
