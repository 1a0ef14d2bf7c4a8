import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { batchByKey, type Logger } from '../src';
import { Keyspace } from '../src/storage/keys';
import { startRedis, type LocalRedis } from '../tools/redis-server';
import { range, track, waitFor } from './helpers/redis';
import { sleep } from './helpers/time';

// A Redis of its own: killing every client must not disturb the other test files.
let server: LocalRedis;
beforeAll(async () => {
  server = await startRedis();
});
afterAll(async () => {
  await server?.stop();
});

describe('Redis connections dropped mid-run (CLIENT KILL)', () => {
  it('workers reconnect and carry on: nothing lost, no unhandled error, close() returns', async () => {
    const warnings: unknown[] = [];
    const logger: Logger = {
      warn: (m, meta) => void warnings.push([m, String(meta?.err)]),
      error: (m, meta) => void warnings.push([m, String(meta?.err)]),
    };
    const seen = new Set<string>();
    const connection = { host: '127.0.0.1', port: server.port, maxRetriesPerRequest: null };
    const b = track(
      batchByKey({
        name: 'faults',
        connection,
        sliceSize: 20,
        maxRuntimeMs: 50,
        logger,
        backoff: { type: 'fixed', delayMs: 50 },
        attempts: 1000,
        // A job that BullMQ failed while Redis was unreachable comes back through the sweep.
        recoveryIntervalMs: 1000,
        async eachIteration(ids) {
          await sleep(5);
          for (const id of ids) seen.add(id);
        },
      }),
    );
    const keys = range(5, 'k');
    for (const k of keys) await b.performBatchLater(range(600, `${k}-`), { key: k });
    // A job whose fetch reply is lost with a killed connection stays active in BullMQ until its
    // stall check: short lock and check intervals keep that window inside the test's deadline.
    b.createWorker({ concurrency: 4, lockDuration: 2000, stalledInterval: 1000 });

    const admin = track(new Redis({ host: '127.0.0.1', port: server.port }));
    let kills = 0;
    const acknowledged: string[] = [];
    while (seen.size < 3000 && kills < 15) {
      await sleep(60);
      await admin.client('KILL', 'TYPE', 'normal', 'SKIPME', 'yes');
      kills++;
      // Pushes during the outage: every push that resolved must be processed.
      const ids = range(10, `late-${kills}-`);
      await b.performBatchLater(ids, { key: 'late' }).then(
        () => acknowledged.push(...ids),
        () => {},
      );
    }
    const expected = 3000 + acknowledged.length;
    await waitFor(() => seen.size === expected, { what: `all ${expected} ids`, timeoutMs: 40_000 }).catch(async (e: Error) => {
      const { Queue } = await import('bullmq');
      const q = new Queue<{ key: string }>('faults', { connection });
      const counts = await q.getJobCounts();
      const jobs = await q.getJobs(['active', 'waiting', 'delayed', 'failed', 'prioritized']);
      const states = await Promise.all(jobs.map(async (j) => `${j.id}:${j.data.key}:${await j.getState()}:${j.failedReason ?? ''}`));
      const backlogs = await Promise.all([...keys, 'late'].map(async (k) => `${k}=${JSON.stringify(await b.backlog(k))}`));
      await q.close();
      throw new Error(
        `${e.message}; counts ${JSON.stringify(counts)} jobs ${states.join(' ')} backlogs ${backlogs.join(' ')}; the logger saw: ` +
          `${JSON.stringify(warnings).slice(0, 2000)}`,
      );
    });
    expect(acknowledged.length).toBeGreaterThan(0);
    for (const id of acknowledged) expect(seen.has(id)).toBe(true);
    expect(kills).toBeGreaterThan(3);
    for (const k of keys) expect(await b.backlog(k)).toEqual({ pending: 0, inFlight: 0, retrying: 0 });
  });

  it('worker.close() and close() right after the connections drop resolve (BullMQ would wait for an end that never comes)', async () => {
    const seen: string[] = [];
    const b = track(
      batchByKey({
        name: 'close-after-kill',
        connection: { host: '127.0.0.1', port: server.port },
        eachIteration: (ids) => void seen.push(...ids),
      }),
    );
    const worker = b.createWorker({ concurrency: 4 });
    const admin = track(new Redis({ host: '127.0.0.1', port: server.port }));
    await b.performBatchLater(range(500), { key: 'k' });
    await waitFor(() => seen.length > 0, { intervalMs: 1, what: 'the run to start' });
    // While the worker runs; then close inside the connections' reconnect window, as a deploy
    // right after a failover would.
    await admin.client('KILL', 'TYPE', 'normal', 'SKIPME', 'yes');
    await sleep(300);
    // The bound this checks is the test's own timeout: before the fix both closes never resolved.
    await worker.close();
    await b.close();
    // Nothing lost: what did not run is still pending (or in flight) for the next worker.
    const names = new Keyspace('bull', 'close-after-kill').forKey('k');
    const [pending, inFlight] = await Promise.all([admin.llen(names.pending), admin.llen(names.inFlight)]);
    expect(new Set(seen).size + pending + inFlight).toBeGreaterThanOrEqual(500);
  });
});
