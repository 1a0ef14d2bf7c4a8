import { describe, expect, it } from 'vitest';
import { createHash } from 'node:crypto';
import { Queue, Worker } from 'bullmq';
import { Redis } from 'ioredis';
import { batchByKey } from '../src';
import { bullmqScript } from '../src/storage/scripts';
import { isolatedRedis, onCluster, range, Recorder, track, uniqueName, waitFor } from './helpers/redis';

/**
 * A run's last claim completes its BullMQ job too (engine/finisher.ts). A Redis of its own, so
 * the command log holds only this file's commands. Standalone only: on a Cluster the run
 * completes its job with BullMQ's own call (BullMQ's keys are in another slot).
 */
const server = isolatedRedis();
const standaloneOnly = it.skipIf(onCluster());

const moveToFinished = bullmqScript('moveToFinished');
/** The SHA BullMQ sends its own moveToFinished by (ioredis's defineCommand hashes the source). */
const MOVE_TO_FINISHED = createHash('sha1').update(moveToFinished.content).digest('hex');

/** Every script call Redis logged while `run` ran, as [its SHA, its first key]. */
async function scriptCalls(admin: Redis, run: () => Promise<unknown>): Promise<[string, string][]> {
  await admin.config('SET', 'slowlog-log-slower-than', '0');
  await admin.config('SET', 'slowlog-max-len', '100000');
  await admin.slowlog('RESET');
  await run();
  const log = (await admin.slowlog('GET', -1)) as [number, number, number, string[]][];
  await admin.config('SET', 'slowlog-log-slower-than', '10000');
  return log.flatMap(([, , , args]) => {
    const [command, script, , firstKey] = args;
    // A script's first call on a connection is an EVAL of its source (the log keeps 128 chars of it).
    if (command?.toLowerCase() === 'eval')
      return [[script!.startsWith(moveToFinished.content.slice(0, 100)) ? MOVE_TO_FINISHED : script!, firstKey ?? '']];
    return command?.toLowerCase() === 'evalsha' ? [[script!, firstKey ?? ''] as [string, string]] : [];
  });
}

describe('a run completes its job in its last claim', () => {
  standaloneOnly('sends no moveToFinished of its own, and BullMQ still completes each job once and fetches the next', async () => {
    const admin = track(new Redis(server().url));
    const rec = new Recorder();
    const name = uniqueName();
    const b = track(batchByKey({ name, connection: server().url, eachIteration: rec.handler }));
    const keys = range(60, 'k-');
    for (const key of keys) await b.performBatchLater([`${key}:a`, `${key}:b`], { key });
    const worker = b.createWorker({ concurrency: 3, autorun: false });
    const completed: string[] = [];
    worker.on('completed', (job) => completed.push((job.data as { key: string }).key));
    const calls = await scriptCalls(admin, async () => {
      void worker.run();
      await waitFor(() => completed.length >= keys.length, { what: 'every key job completed' });
    });
    // BullMQ's moveToFinished for this queue (its first key is the queue's wait list) never went alone.
    expect(calls.filter(([sha, key]) => sha === MOVE_TO_FINISHED && key.includes(`:${name}:`))).toEqual([]);
    expect([...completed].sort()).toEqual([...keys].sort());
    expect([...rec.all].sort()).toEqual(keys.flatMap((key) => [`${key}:a`, `${key}:b`]).sort());
    const queue = track(new Queue(name, { connection: { host: '127.0.0.1', port: server().port } }));
    expect(await queue.getJobCounts('active', 'wait', 'delayed', 'prioritized', 'failed')).toEqual({
      active: 0,
      wait: 0,
      delayed: 0,
      prioritized: 0,
      failed: 0,
    });
  });

  standaloneOnly('a worker of the caller’s own (processor()) completes its jobs with BullMQ’s call', async () => {
    const admin = track(new Redis(server().url));
    const rec = new Recorder();
    const name = uniqueName();
    const b = track(batchByKey({ name, connection: server().url, eachIteration: rec.handler }));
    for (const key of range(5, 'k-')) await b.performBatchLater([key], { key });
    const connection = { host: '127.0.0.1', port: server().port };
    const calls = await scriptCalls(admin, async () => {
      track(new Worker(name, b.processor(), { connection, prefix: 'bull' }));
      await waitFor(() => rec.all.length >= 5, { what: 'every id' });
      await waitFor(async () => (await track(new Queue(name, { connection })).getActiveCount()) === 0, { what: 'jobs completed' });
    });
    expect(calls.filter(([sha, key]) => sha === MOVE_TO_FINISHED && key.includes(`:${name}:`)).length).toBeGreaterThanOrEqual(5);
    expect([...rec.all].sort()).toEqual(range(5, 'k-'));
  });
});
