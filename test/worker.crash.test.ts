import { describe, expect, it } from 'vitest';
import { startWorkerProcess, stopProcess } from './helpers/processes';
import { batchByKey, type Batcher, type BatchByKeyOptions } from '../src';
import { parseUrl, range, redisClient, redisUrl, testBatcher, track, uniqueName, waitFor } from './helpers/redis';

// Short BullMQ lock and stall check, short key lock: the recovery window is their sum.
const FAST_RECOVERY = { lockTtlMs: 2000 };
const FAST_STALL = { lockDuration: 1000, stalledInterval: 500 };

/**
 * The batcher that takes over from a killed worker process, recording what it processes and each
 * id's attempts. With the fast key lock unless told otherwise (`{}`: the defaults).
 */
function survivorOf(
  name: string,
  options: Partial<BatchByKeyOptions> = FAST_RECOVERY,
): { survivor: Batcher; processed: string[]; attempts: Map<string, number[]> } {
  const processed: string[] = [];
  const attempts = new Map<string, number[]>();
  const survivor = track(
    batchByKey({
      name,
      connection: { ...parseUrl(redisUrl()), maxRetriesPerRequest: null },
      sliceSize: 10,
      ...options,
      eachIteration: (ids, ctx) => {
        processed.push(...ids);
        for (const id of ids) attempts.set(id, [...(attempts.get(id) ?? []), ctx.attempt]);
      },
    }),
  );
  return { survivor, processed, attempts };
}

describe('a worker process killed with SIGKILL mid-slice', () => {
  it('loses nothing: the claimed ids go back to pending and are processed by another worker', async () => {
    const name = uniqueName('crash');
    const redis = redisClient();
    const victim = await startWorkerProcess({
      redisUrl: redisUrl(),
      name,
      mode: 'hang',
      options: { sliceSize: 10, ...FAST_RECOVERY },
      worker: FAST_STALL,
    });
    const { survivor, processed } = survivorOf(name);
    await survivor.performBatchLater(range(50), { key: 'k' });
    await waitFor(async () => (await redis.llen(`${name}:started`)) === 10, { what: 'the victim to claim a slice' });
    expect(await survivor.backlog('k')).toEqual({ pending: 40, inFlight: 10, retrying: 0 });

    await stopProcess(victim, 'SIGKILL');
    survivor.createWorker(FAST_STALL);
    await waitFor(() => processed.length === 50, { what: 'all 50 ids', timeoutMs: 30_000 });
    // The victim's slice comes back first (list order), and nothing is left over.
    expect(processed).toEqual(range(50));
    expect(await redis.lrange(`${name}:started`, 0, -1)).toEqual(range(10));
    expect(await survivor.backlog('k')).toEqual({ pending: 0, inFlight: 0, retrying: 0 });
  });
});

describe('a worker process with 4 lanes per key killed mid-slice', () => {
  it('loses nothing when the next worker runs 1 lane: the first claim restores every lane', async () => {
    const name = uniqueName('crash-lanes');
    const redis = redisClient();
    const victim = await startWorkerProcess({
      redisUrl: redisUrl(),
      name,
      mode: 'hang',
      options: { sliceSize: 10, concurrencyPerKey: 4, ...FAST_RECOVERY },
      worker: FAST_STALL,
    });
    const { survivor, processed } = survivorOf(name);
    await survivor.performBatchLater(range(50), { key: 'k' });
    await waitFor(async () => (await redis.llen(`${name}:started`)) === 40, { what: 'the victim to claim 4 slices' });

    await stopProcess(victim, 'SIGKILL');
    survivor.createWorker(FAST_STALL);
    await waitFor(() => processed.length === 50, { what: 'all 50 ids', timeoutMs: 30_000 });
    expect([...processed].sort()).toEqual(range(50).sort());
    expect(await survivor.backlog('k')).toEqual({ pending: 0, inFlight: 0, retrying: 0 });
  });
});

describe('a poison id that kills its worker process', () => {
  it('still ends in the dead letters: a run that dies counts as a failed run of its slice', async () => {
    const name = uniqueName('poison');
    const redis = redisClient();
    const options = { sliceSize: 2, attempts: 1, ...FAST_RECOVERY };
    const pusher = testBatcher({ name, ...options, eachIteration: () => {} });
    await pusher.performBatchLater(['a', 'poison'], { key: 'k' });
    // Each worker process dies on the poison; the next one recovers the slice it left. With one
    // attempt: the first death splits the slice, the second (the poison alone) dead-letters it.
    for (let deaths = 0; (await pusher.deadLetters.count()) === 0; deaths++) {
      expect(deaths).toBeLessThan(4);
      // BullMQ fails a job after maxStalledCount stalls (default 1); the recovery sweep would add it
      // back within recoveryIntervalMs, but this test need not wait for that.
      const worker = { ...FAST_STALL, maxStalledCount: 10 };
      const child = await startWorkerProcess({ redisUrl: redisUrl(), name, mode: 'crash-on-poison', options, worker });
      await Promise.race([
        new Promise((resolve) => child.once('exit', resolve)),
        waitFor(async () => (await pusher.deadLetters.count()) > 0, { timeoutMs: 30_000, what: 'a dead letter' }),
      ]);
      await stopProcess(child);
    }
    const [letter] = (await pusher.deadLetters.list()).letters;
    expect(letter).toMatchObject({ key: 'k', id: 'poison', error: { name: 'SliceCrashedError' } });
    await waitFor(async () => (await redis.lrange(`${name}:processed`, 0, -1)).includes('a'), { what: "'a' processed" });
    expect(await pusher.backlog('k')).toEqual({ pending: 0, inFlight: 0, retrying: 0 });
  });
});

describe('two worker processes on the same keys', () => {
  it('never run two slices of one key at once and process every id exactly once', async () => {
    const name = uniqueName('multi');
    const redis = redisClient();
    const options = { sliceSize: 10, maxRuntimeMs: 30 };
    const workers = await Promise.all(
      [1, 2].map(() => startWorkerProcess({ redisUrl: redisUrl(), name, options, worker: { concurrency: 4 }, sliceDelayMs: 2 })),
    );
    const pusher = testBatcher({ name, ...options, eachIteration: () => {} });
    for (const k of range(8, 'key-')) await pusher.performBatchLater(range(250, `${k}:`), { key: k });
    await waitFor(async () => (await redis.llen(`${name}:processed`)) >= 2000, { what: '2000 ids', timeoutMs: 45_000 });
    await Promise.all(workers.map((w) => stopProcess(w)));

    const processed = await redis.lrange(`${name}:processed`, 0, -1);
    expect(processed).toHaveLength(2000);
    expect(new Set(processed).size).toBe(2000);
    expect(await redis.get(`${name}:overlaps`)).toBeNull();
  });
});

describe('the crash bound with the default lock and stall settings', () => {
  it('a key whose worker was SIGKILLed mid-slice runs again within 60 s (45 s by these settings), its slice counted as one failed attempt', async () => {
    const name = uniqueName('crash-bound');
    const redis = redisClient();
    const victim = await startWorkerProcess({ redisUrl: redisUrl(), name, mode: 'hang', options: { sliceSize: 10 } });
    const { survivor, attempts } = survivorOf(name, {});
    await survivor.performBatchLater(range(30), { key: 'k' });
    await waitFor(async () => (await redis.llen(`${name}:started`)) === 10, { what: 'the victim to claim a slice' });

    await stopProcess(victim, 'SIGKILL');
    const killedAt = Date.now();
    survivor.createWorker();
    await waitFor(() => attempts.size === 30, { what: 'all 30 ids', timeoutMs: 60_000, intervalMs: 100 });
    const resumedMs = Date.now() - killedAt;
    console.log(
      `crash bound (defaults: lockTtlMs 30 s, lockDuration 30 s, stalledInterval 15 s): the key ran again ${resumedMs} ms after SIGKILL`,
    );
    expect(resumedMs).toBeLessThan(60_000);
    // The killed run's slice counts as one failed attempt; the ids it never reached as none.
    for (const id of range(10)) expect(attempts.get(id)).toEqual([2]);
    for (const id of range(30).slice(10)) expect(attempts.get(id)).toEqual([1]);
  }, 90_000);
});

describe('a worker whose event loop is blocked longer than lockTtlMs', () => {
  it('loses its lock and commits nothing; the next holder runs the slice and its commits stand', async () => {
    const name = uniqueName('blocked');
    const redis = redisClient();
    const blocked = await startWorkerProcess({
      redisUrl: redisUrl(),
      name,
      mode: 'block',
      blockMs: 5_000,
      options: { sliceSize: 10, ...FAST_RECOVERY },
      worker: FAST_STALL,
    });
    const { survivor, processed } = survivorOf(name);
    await survivor.performBatchLater(range(30), { key: 'k' });
    await waitFor(async () => (await redis.llen(`${name}:started`)) === 10, { what: 'the blocked worker to claim a slice' });
    survivor.createWorker(FAST_STALL);
    // The survivor takes the key once the blocked worker's locks expire, while it is still blocked.
    await waitFor(() => processed.length === 30, { what: 'the survivor to run every id', timeoutMs: 30_000 });
    // The blocked worker wakes up, finishes its slice and tries to ack it: refused, it commits nothing.
    await waitFor(async () => (await redis.llen(`${name}:processed`)) === 10, { what: 'the blocked slice to return', timeoutMs: 15_000 });
    await stopProcess(blocked);
    expect([...processed].sort()).toEqual(range(30).sort());
    // Its stale ack neither acked ids twice nor brought any back: the survivor's commits stand.
    expect(await survivor.backlog('k')).toEqual({ pending: 0, inFlight: 0, retrying: 0 });
    expect(await survivor.deadLetters.count()).toBe(0);
  });
});
