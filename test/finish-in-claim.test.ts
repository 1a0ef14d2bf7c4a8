import { describe, expect, it } from 'vitest';
import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { createRedisBackend, Queue, Worker, type RedisQueueBackend } from 'bullmq';
import { Redis } from 'ioredis';
import { batchByKey, InvalidOptionError, type FastPath } from '../src';
import { BULLMQ_FINISH_KEYS, bullmqScript, derivable } from '../src/bullmq';
import { fastPathProblem } from '../src/engine/claims/backend';
import { isolatedRedis, keyspaceOf, onCluster, prefixOf, range, Recorder, track, uniqueName, waitFor } from './helpers/redis';

/**
 * A run's first claim rides on BullMQ's fetch, and its last claim completes its BullMQ job and
 * claims the next job's first slice (engine/claims/fused.ts). A Redis of its own, so the command log
 * holds only this file's commands. Standalone only: on a Cluster runs make their own claims and
 * BullMQ its own calls (BullMQ's keys are in another slot).
 */
const server = isolatedRedis();
const execFileAsync = promisify(execFile);

/** CI runs the suite once more with the fused path off (BATCH_BY_KEY_FAST_PATH=off): these test the path itself. */
const fastPathOff = process.env.BATCH_BY_KEY_FAST_PATH === 'off';
const standaloneOnly = it.skipIf(onCluster() || fastPathOff);

const moveToFinished = bullmqScript('moveToFinished');
const moveToActive = bullmqScript('moveToActive');
/** The SHAs BullMQ sends its own moveToFinished and moveToActive by (ioredis's defineCommand hashes the source). */
const MOVE_TO_FINISHED = createHash('sha1').update(moveToFinished.content).digest('hex');
const MOVE_TO_ACTIVE = createHash('sha1').update(moveToActive.content).digest('hex');

/** Every script call Redis logged while `run` ran, as [its SHA or function, its first key, how many keys it sent]. */
async function scriptCalls(admin: Redis, run: () => Promise<unknown>): Promise<[string, string, number][]> {
  await admin.config('SET', 'slowlog-log-slower-than', '0');
  await admin.config('SET', 'slowlog-max-len', '100000');
  await admin.slowlog('RESET');
  await run();
  const log = (await admin.slowlog('GET', -1)) as [number, number, number, string[]][];
  await admin.config('SET', 'slowlog-log-slower-than', '10000');
  return log.flatMap(([, , , args]) => {
    const [command, script, numkeys, firstKey] = args;
    const keys = Number(numkeys);
    // A script's first call on a connection is an EVAL of its source (the log keeps 128 chars of it).
    if (command?.toLowerCase() === 'eval')
      return [
        [
          script!.startsWith(moveToFinished.content.slice(0, 100))
            ? MOVE_TO_FINISHED
            : script!.startsWith(moveToActive.content.slice(0, 100))
              ? MOVE_TO_ACTIVE
              : script!,
          firstKey ?? '',
          keys,
        ],
      ];
    // Ours are FCALLs of their functions on Redis 7 (named, where an EVALSHA names its SHA).
    return /^(evalsha|fcall)$/i.test(command ?? '') ? [[script!, firstKey ?? '', keys] as [string, string, number]] : [];
  });
}

/**
 * `count` keys of two ids each, pushed, then a worker of concurrency 3 run until every key job
 * completed: what the handler saw, the jobs completed (by key) and the script calls logged meanwhile.
 */
async function runTwoIdsPerKey(count: number, fastPath?: FastPath) {
  const admin = track(new Redis(server().url));
  const rec = new Recorder();
  const name = uniqueName();
  const b = track(batchByKey({ name, connection: server().url, eachIteration: rec.handler, ...(fastPath && { fastPath }) }));
  const keys = range(count, 'k-');
  for (const key of keys) await b.performBatchLater([`${key}:a`, `${key}:b`], { key });
  const worker = b.createWorker({ concurrency: 3, autorun: false });
  const completed: string[] = [];
  worker.on('completed', (job) => completed.push((job.data as { key: string }).key));
  const calls = await scriptCalls(admin, async () => {
    void worker.run();
    await waitFor(() => completed.length >= keys.length, { what: 'every key job completed' });
  });
  return { name, keys, rec, completed, calls };
}

describe('a run completes its job in its last claim', () => {
  standaloneOnly('sends no moveToFinished of its own, and BullMQ still completes each job once and fetches the next', async () => {
    const { name, keys, rec, completed, calls } = await runTwoIdsPerKey(60);
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

describe('a fetch makes the fetched key’s first claim', () => {
  standaloneOnly('one-id keys under a backlog: one script call per key, and no BullMQ fetch or completion of its own', async () => {
    const admin = track(new Redis(server().url));
    const rec = new Recorder();
    const name = uniqueName();
    const b = track(batchByKey({ name, connection: server().url, eachIteration: rec.handler }));
    const keys = range(200, 'k-');
    for (const key of keys) await b.performBatchLater([key], { key });
    const worker = b.createWorker({ concurrency: 5, autorun: false });
    const calls = await scriptCalls(admin, async () => {
      void worker.run();
      await waitFor(() => rec.all.length >= keys.length, { what: 'every id' });
      await waitFor(
        async () => (await track(new Queue(name, { connection: { host: '127.0.0.1', port: server().port } })).getActiveCount()) === 0,
        {
          what: 'every job completed',
        },
      );
    });
    const ours = calls.filter(([sha, key]) => sha !== MOVE_TO_ACTIVE && sha !== MOVE_TO_FINISHED && key.includes(name));
    expect(calls.filter(([sha]) => sha === MOVE_TO_ACTIVE || sha === MOVE_TO_FINISHED)).toEqual([]);
    // Each run's last claim fetches and claims the next; a few fetches start the slots, and a few
    // more follow an idle fetch at the end. (Three calls per key before this: fetch, claim, finish.)
    expect(ours.length).toBeLessThanOrEqual(keys.length + 20);
    // A claim sends its key's base name alone, BullMQ's keys included (the claim derives them).
    const claims = ours.filter(([, key]) => key.includes(':bbk:{'));
    expect(claims.length).toBeGreaterThanOrEqual(keys.length);
    expect(claims.filter(([, , numkeys]) => numkeys !== 1)).toEqual([]);
    expect([...rec.all].sort()).toEqual([...keys].sort());
    for (const key of keys) expect(rec.idsOf(key)).toEqual([key]);
  });

  standaloneOnly('a fetched job whose key another run holds claims nothing, waits out the lock, then runs once', async () => {
    const redis = track(new Redis(server().url));
    const rec = new Recorder();
    const name = uniqueName();
    const b = track(batchByKey({ name, connection: server().url, eachIteration: rec.handler }));
    await b.performBatchLater(['1', '2'], { key: 'k' });
    const names = keyspaceOf(b).forKey('k');
    await redis.set(names.lock, 'another-run', 'PX', 600);
    const worker = b.createWorker({ autorun: false });
    const delayed = new Promise<void>((resolve) => worker.once('active', () => resolve()));
    void worker.run();
    await delayed;
    // The fetch's claim was refused: the other run's lock and the ids are untouched.
    await waitFor(
      async () => (await track(new Queue(name, { connection: { host: '127.0.0.1', port: server().port } })).getDelayedCount()) === 1,
      {
        what: 'the job delayed behind the lock',
      },
    );
    expect(await redis.get(names.lock)).toBe('another-run');
    expect(await b.backlog('k')).toEqual({ pending: 2, inFlight: 0, retrying: 0 });
    expect(rec.all).toEqual([]);
    await waitFor(() => rec.all.length === 2, { what: 'both ids once the lock expired' });
    expect(rec.idsOf('k')).toEqual(['1', '2']);
    expect(await b.backlog('k')).toEqual({ pending: 0, inFlight: 0, retrying: 0 });
  });

  standaloneOnly('a stale holder of a fetched claim cannot commit: its slice is run again by the new holder', async () => {
    const redis = track(new Redis(server().url));
    const rec = new Recorder();
    const name = uniqueName();
    let names!: ReturnType<ReturnType<typeof keyspaceOf>['forKey']>;
    let stolen = false;
    const b = track(
      batchByKey({
        name,
        connection: server().url,
        lockTtlMs: 1000,
        async eachIteration(ids, ctx) {
          rec.handler(ids, ctx);
          if (!stolen) {
            stolen = true;
            // The lock expired under this run and another took it.
            await redis.set(names.lock, 'new-holder', 'PX', 400);
          }
        },
      }),
    );
    names = keyspaceOf(b).forKey('k');
    await b.performBatchLater(['a', 'b'], { key: 'k' });
    b.createWorker();
    await waitFor(() => stolen, { what: 'the first slice' });
    // Its ack was refused: the slice stays in flight for the next holder to recover.
    await waitFor(async () => (await b.backlog('k')).inFlight === 2, { what: 'the refused ack' });
    await waitFor(() => rec.all.length === 4, { what: 'the slice run again once the new holder let go' });
    expect(rec.all).toEqual(['a', 'b', 'a', 'b']);
    expect(await b.backlog('k')).toEqual({ pending: 0, inFlight: 0, retrying: 0 });
  });

  standaloneOnly('a rateLimit function of the key keeps BullMQ’s fetch: the run makes its own first claim', async () => {
    const admin = track(new Redis(server().url));
    const rec = new Recorder();
    const name = uniqueName();
    const b = track(
      batchByKey({ name, connection: server().url, rateLimit: () => ({ max: 100, durationMs: 1000 }), eachIteration: rec.handler }),
    );
    for (const key of range(5, 'k-')) await b.performBatchLater([key], { key });
    const worker = b.createWorker({ autorun: false });
    const calls = await scriptCalls(admin, async () => {
      void worker.run();
      await waitFor(() => rec.all.length >= 5, { what: 'every id' });
    });
    expect(calls.filter(([sha]) => sha === MOVE_TO_ACTIVE).length).toBeGreaterThanOrEqual(1);
    expect([...rec.all].sort()).toEqual(range(5, 'k-'));
  });
});

describe('BullMQ’s event stream', () => {
  standaloneOnly('gets no entry for a key job from our scripts, and every entry for a job not ours on the same queue', async () => {
    const name = uniqueName();
    const b = track(batchByKey({ name, connection: server().url, eachIteration: () => {} }));
    const queue = track(new Queue(name, { connection: { url: server().url }, prefix: prefixOf(name) }));
    // A job not ours between key jobs, so that a run's last claim fetches it as its next job; and
    // one delayed, which some fetch promotes.
    await b.performBatchLater(['a'], { key: 'first' });
    const between = await queue.add('mail', {});
    const delayed = await queue.add('later', {}, { delay: 50 });
    for (const key of range(5, 'k-')) await b.performBatchLater(['a'], { key });
    const worker = b.createWorker({ concurrency: 1 });
    // In the order they ended: a job not ours fails by BullMQ's own call, which fetches the next
    // job, and writes that job's `active` whoever it is.
    const ended: { id: string; ours: boolean }[] = [];
    worker.on('completed', (job) => ended.push({ id: job.id!, ours: true }));
    worker.on('failed', (job) => ended.push({ id: job!.id!, ours: false }));
    await waitFor(() => ended.length === 8, { what: 'every key job done, and both jobs not ours failed' });
    const admin = track(new Redis(server().url));
    const entries = (await admin.xrange(queue.keys.events!, '-', '+')).map(([, fields]) => ({
      event: fields[1],
      jobId: fields.includes('jobId') ? fields[fields.indexOf('jobId') + 1] : undefined,
    }));
    const of = (id: string) => entries.filter((e) => e.jobId === id).map((e) => e.event);
    const fetchedByBullmq = new Set(ended.flatMap((e, i) => (i > 0 && !ended[i - 1]!.ours ? [e.id] : [])));
    const keyJobs = ended.filter((e) => e.ours).map((e) => e.id);
    expect(keyJobs.map((id) => ({ id, events: of(id) }))).toEqual(
      keyJobs.map((id) => ({ id, events: fetchedByBullmq.has(id) ? ['active'] : [] })),
    );
    expect(of(between.id!)).toEqual(['added', 'waiting', 'active', 'failed', 'retries-exhausted']);
    expect(of(delayed.id!)).toEqual(['added', 'delayed', 'waiting', 'active', 'failed', 'retries-exhausted']);
  });
});

describe('a completion’s keys derived in the claim', () => {
  it('are derived only when they are what BullMQ builds', () => {
    const prefix = 'bull:q:';
    const keys = BULLMQ_FINISH_KEYS.map((name) => prefix + (name === '' ? '7' : name));
    const args = ['7', 1_700_000_000_000, 'returnvalue', 'null', 'completed', 1, prefix, Buffer.from('opts'), ''];
    expect(derivable({ keys, args }, '7', true)).toBe(true);
    // A BullMQ that orders its keys otherwise, or puts the job id elsewhere, gets its keys sent.
    expect(derivable({ keys: [...keys.slice(1), keys[0]!], args }, '7', true)).toBe(false);
    expect(derivable({ keys, args: ['x', ...args.slice(1)] }, '7', true)).toBe(false);
    expect(derivable({ keys, args }, '7', false)).toBe(false);
  });
});

describe('fastPath', () => {
  it.skipIf(onCluster())("'off': a worker runs BullMQ's own fetch and completion, and every key job still completes once", async () => {
    const { name, keys, rec, completed, calls } = await runTwoIdsPerKey(20, 'off');
    const bullmqOwn = (sha: string) => calls.filter(([called, key]) => called === sha && key.includes(`:${name}:`)).length;
    expect(bullmqOwn(MOVE_TO_FINISHED)).toBeGreaterThanOrEqual(keys.length);
    expect(bullmqOwn(MOVE_TO_ACTIVE)).toBeGreaterThan(0);
    expect([...completed].sort()).toEqual([...keys].sort());
    expect([...rec.all].sort()).toEqual(keys.flatMap((key) => [`${key}:a`, `${key}:b`]).sort());
  });

  it('is validated, and so is its environment variable, before anything reaches Redis', () => {
    // @ts-expect-error: not a mode
    expect(() => batchByKey({ name: uniqueName(), connection: server().url, fastPath: 'on' })).toThrow(InvalidOptionError);
    const before = process.env.BATCH_BY_KEY_FAST_PATH;
    process.env.BATCH_BY_KEY_FAST_PATH = 'fast';
    try {
      expect(() => batchByKey({ name: uniqueName(), connection: server().url })).toThrow(/BATCH_BY_KEY_FAST_PATH/);
      // The option, when given, is what counts.
      expect(() => batchByKey({ name: uniqueName(), connection: server().url, fastPath: 'auto' })).not.toThrow();
    } finally {
      if (before === undefined) delete process.env.BATCH_BY_KEY_FAST_PATH;
      else process.env.BATCH_BY_KEY_FAST_PATH = before;
    }
  });

  it.skipIf(onCluster())(
    "'auto' on a BullMQ without the scripts the fast path inlines: the library is built without them, a worker warns and runs the plain path",
    async () => {
      const { stdout } = await execFileAsync(process.execPath, ['--import', 'tsx', join(__dirname, 'fixtures', 'older-bullmq.ts')], {
        // 'auto' whatever this suite runs with: the fixture tests what 'auto' decides.
        env: {
          ...process.env,
          REDIS_URL: server().url,
          BBK_NAME: uniqueName(),
          BBK_IDS: '20',
          BBK_KEYS: '5',
          BATCH_BY_KEY_FAST_PATH: 'auto',
        },
        timeout: 60_000,
      });
      const { processed, warnings, functions } = JSON.parse(stdout.trim().split('\n').pop()!) as {
        processed: string[];
        warnings: string[];
        functions: string[];
      };
      expect([...processed].sort()).toEqual(Array.from({ length: 20 }, (_, i) => `id-${i}`).sort());
      // Only the script that inlines it is left out.
      expect(functions).toContain('claim');
      expect(functions).toContain('fetch-and-claim');
      expect(functions).not.toContain('claim-and-finish');
      expect(warnings.join('\n')).toMatch(/no script moveToFinished\).*workers run BullMQ's own fetch and completion/);
    },
  );

  it("'auto' checks the installed BullMQ's backend, and names what it lacks", async () => {
    const backend = createRedisBackend(uniqueName('check'), { connection: { host: '127.0.0.1', port: server().port } });
    try {
      expect(fastPathProblem(backend)).toBeUndefined();
      // As a BullMQ whose backend changed shape would be: the same object, one member gone or moved.
      const without = (member: string, value: unknown = undefined) =>
        Object.assign(Object.create(backend) as RedisQueueBackend, { [member]: value });
      expect(fastPathProblem(without('moveToCompleted'))).toBe('its Redis backend has no moveToCompleted()');
      expect(fastPathProblem(without('execCommand'))).toBe('its Redis backend has no execCommand()');
      expect(fastPathProblem(without('moveToFinishedKeys', ['a', 'b']))).toMatch(/builds 2 moveToFinished keys/);
    } finally {
      await backend.close();
    }
  });
});
