import { createRequire } from 'node:module';
import * as bullmq from 'bullmq';
import { describe, expect, it } from 'vitest';
import { BULLMQ_FINISH_KEYS, bullmqScript, markNotDrained, PUSH_ADD_KEYS } from '../src/bullmq';
import type { KeyJobData } from '../src';
import { Gate } from './helpers/gate';
import { queueOf, Recorder, redisClient, testBatcher, testConnection, track, uniqueName, waitFor } from './helpers/redis';
import { keysOfShard, layoutOf } from './helpers/shards';
import { sleep } from './helpers/time';

/**
 * What batch-by-key takes from BullMQ beyond its documented API, each named, so that a BullMQ
 * upgrade that moves one fails here first, saying what moved (CI runs it on the oldest and the
 * newest release of the peer range). The behaviour built on each is tested where it is used:
 * finish-in-claim.test.ts (the fused fetch and completion), push.test.ts (the inlined add and
 * its two-call fallback), processor.test.ts (add-job.lua's adds, under a key job's spare id);
 * how BullMQ's worker loop fetches, which the shard workers' slot budget builds on, below.
 */
describe('the BullMQ internals batch-by-key relies on', () => {
  it('is a BullMQ of the peer range package.json declares, which the app provides', () => {
    const require = createRequire(import.meta.url);
    const pkg = require('../package.json') as {
      dependencies: { bullmq?: string };
      peerDependencies: { bullmq: string };
      peerDependenciesMeta: { bullmq?: { optional?: boolean } };
      devDependencies: { bullmq: string };
    };
    const semver = require('semver') as {
      satisfies(version: string, range: string): boolean;
      minVersion(range: string): { version: string };
    };
    const installed = (require('bullmq/package.json') as { version: string }).version;
    const { bullmq: peer } = pkg.peerDependencies;
    const { bullmq: dev } = pkg.devDependencies;
    // A dependency would give an app two copies beside its own BullMQ: two Queue classes, two sets of scripts.
    expect(pkg.dependencies.bullmq, 'bullmq is a peer, not a dependency').toBeUndefined();
    expect(pkg.peerDependenciesMeta.bullmq?.optional, 'the bullmq peer is required: nothing runs without it').not.toBe(true);
    // CI runs the suites on this range's oldest release and its newest: widening it needs CI on the new oldest.
    expect(peer, 'the peer range is the one CI proves').toBe('^6.3.16');
    expect(dev, 'the devDependency is pinned to a minor (~x.y.z): its internals are not semver').toMatch(/^~6\.7\.\d+$/);
    expect(semver.satisfies(semver.minVersion(dev).version, peer), `the devDependency ${dev} is inside the peer range ${peer}`).toBe(true);
    expect(semver.satisfies(installed, peer), `the installed BullMQ ${installed} is inside the peer range ${peer}`).toBe(true);
  });

  it('has the Lua scripts the claims and the push inline, with the key counts their arguments are built for', () => {
    for (const [name, keys] of [
      ['moveToActive', undefined],
      ['moveToFinished', BULLMQ_FINISH_KEYS.length],
      ['addStandardJob', PUSH_ADD_KEYS.standard.length],
      ['addDelayedJob', PUSH_ADD_KEYS.delayed.length],
      ['addPrioritizedJob', undefined],
    ] as const) {
      const script = bullmqScript(name);
      expect(
        script.content.length,
        `bullmq/dist/cjs/scripts exports ${name}, inlined by fetch-and-claim.lua, claim-and-finish.lua, push.lua or add-job.lua`,
      ).toBeGreaterThan(0);
      if (keys !== undefined)
        expect(script.keys, `BullMQ's ${name} takes ${keys} keys (keys.ts or bullmq/job-add.ts derives them)`).toBe(keys);
    }
  });

  it('exports the Redis backend the worker hooks, with the methods engine/claims and bullmq/fused-path.ts wrap and call', async () => {
    expect(
      typeof bullmq.createRedisBackend,
      'bullmq exports createRedisBackend (engine/claims/backend.ts builds the worker backend with it)',
    ).toBe('function');
    expect(typeof bullmq.raw2NextJobData, 'bullmq exports raw2NextJobData (a claim-completed job hands BullMQ its next job)').toBe(
      'function',
    );
    const backend = bullmq.createRedisBackend(uniqueName('internals'), { connection: testConnection() as bullmq.ConnectionOptions });
    for (const method of ['execCommand', 'moveToCompleted', 'moveToCompletedArgs'] as const) {
      expect(typeof backend[method], `BullMQ's Redis backend has ${method}`).toBe('function');
    }
    expect(backend.moveToFinishedKeys, "BullMQ's Redis backend lists moveToFinished's keys").toHaveLength(BULLMQ_FINISH_KEYS.length);
    await backend.close();
  });

  it('has Job.addJob, which storage/job.ts calls with a capturing client to build the adds push.lua and add-job.lua inline', () => {
    expect(typeof bullmq.Job.prototype.addJob, 'Job.prototype.addJob exists').toBe('function');
  });

  it('has the Worker methods engine/shard-worker.ts overrides, for one slot budget over every shard', () => {
    const proto = bullmq.Worker.prototype as unknown as Record<string, unknown>;
    for (const method of ['moveToActive', 'processJob', 'run', 'pause', 'resume', 'close']) {
      expect(typeof proto[method], `Worker.prototype.${method} exists`).toBe('function');
    }
  });
});

/** BullMQ's blocking wait for a queue marker after a fetch found nothing, in seconds: far above what any step here may take. */
const DRAIN_DELAY_S = 30;
/** How soon a job that waits must be fetched: a bound well under drainDelay, not a wait. */
const PROMPTLY_MS = (DRAIN_DELAY_S * 1000) / 4;

/**
 * How BullMQ's worker loop fetches, as engine/shard-worker.ts relies on it to share one slot
 * budget over every shard's worker (a slot taken before each fetch, handed on to the job a
 * job's end fetches), run on Redis: each fails if the loop changes so that a shard worker
 * stalls, or leaves a job waiting for a marker that no longer comes.
 */
describe("BullMQ's worker loop, as the shard workers' one slot budget relies on it", () => {
  it("fetches the next job after a job moved itself to delayed under that job's token, so in its slot", async () => {
    const rec = new Recorder();
    // One id a minute, batcher-wide: the held key's first slice takes it, and the limit refuses
    // its next one. A key a batcher-wide limit refuses moves its own job to delayed (a
    // DelayedError: the limits wake it by that job's id), and BullMQ fetches the next job at once.
    const active = new Map<string, bullmq.Job<KeyJobData>>();
    const b = testBatcher({
      sliceSize: 1,
      globalRateLimit: { max: 1, durationMs: 60_000 },
      eachIteration: (ids, ctx) => {
        active.set(ctx.key, ctx.job);
        rec.handler(ids, ctx);
      },
    });
    // Both bigger than a slice, so both heavy: the held key, pushed first, goes first.
    await b.performBatchLater(['1', '2'], { key: 'held' });
    await b.performBatchLater(['3', '4'], { key: 'next' });
    const worker = b.createWorker({ concurrency: 1 });
    // The next key's run is refused before its handler: its start is seen here.
    worker.on('active', (job: bullmq.Job<KeyJobData>) => active.set(job.data.key, job));

    // That fetch is made while the delayed job still holds the only slot: a fetch the shard
    // worker did not know for the job's own would wait for a slot that never frees. (The next
    // key's run is refused in its turn: the window is full for a minute.)
    await waitFor(() => active.has('next'), { timeoutMs: 15_000, what: 'the next key job to start (the window is full for 60 s)' });
    expect(await queueOf(b).getJobState(active.get('held')!.id!), "the held key's job moved itself to delayed").toBe('delayed');
    expect(active.get('next')!.token, "BullMQ's handleFailed fetched the next job under the delayed job's token (ShardWorker.ending)").toBe(
      active.get('held')!.token,
    );
    expect(rec.idsOf('held')).toEqual(['1']);
    expect(rec.idsOf('next')).toEqual([]);
  });

  it('starts the jobs a shard worker fetched before its next fetch finds no slot, one job at a time', async () => {
    let running = 0;
    let most = 0;
    const rec = new Recorder();
    const b = testBatcher({
      shards: 2,
      async eachIteration(ids, ctx) {
        most = Math.max(most, ++running);
        rec.handler(ids, ctx);
        await sleep(20);
        running--;
      },
    });
    // On shard 1, whose worker (a follower, far above the budget) fetches again as soon as it
    // fetched one: BullMQ awaits that fetch before it starts the job, which holds the only slot.
    const keys = keysOfShard(layoutOf(b.name, 2), 1, 4);
    for (const key of keys) await b.performBatchLater([key], { key });
    b.createWorker({ concurrency: 1 });

    await waitFor(() => rec.all.length === keys.length, { timeoutMs: 15_000, what: "every key of shard 1's queue" });
    expect(rec.all.sort()).toEqual([...keys].sort());
    expect(most, 'jobs running at once, over both shards').toBe(1);
  });

  /**
   * Two shards, one slot: shard 0's gated job holds it while a job comes to shard 1, whose
   * worker's blocking wait takes its queue's marker and then waits for the slot. No new marker
   * will come for that job.
   */
  async function markerTakenWhileSlotHeld() {
    const rec = new Recorder();
    const started = new Gate();
    const release = new Gate();
    const b = testBatcher({
      shards: 2,
      async eachIteration(ids, ctx) {
        if (ctx.key === onFirst) {
          started.open();
          await release.opened;
        }
        rec.handler(ids, ctx);
      },
    });
    const layout = layoutOf(b.name, 2);
    const [onFirst] = keysOfShard(layout, 0, 1);
    const [onSecond] = keysOfShard(layout, 1, 1);
    const secondMarker = track(
      new bullmq.Queue(b.name, { connection: testConnection() as bullmq.ConnectionOptions, prefix: layout.prefixes[1] }),
    ).keys.marker!;
    const worker = b.createWorker({ concurrency: 1, drainDelay: DRAIN_DELAY_S });
    // Both shards' workers find their queue empty, and then block on its marker.
    await Promise.all(worker.shardWorkers.map((w) => new Promise<void>((drained) => w.once('drained', () => drained()))));

    await b.performBatchLater(['1'], { key: onFirst });
    await started.opened;
    await b.performBatchLater(['2'], { key: onSecond });
    const redis = redisClient();
    await waitFor(async () => (await redis.exists(secondMarker)) === 0, { what: "shard 1's worker to take its queue's marker" });
    expect(rec.idsOf(onSecond!), 'nothing ran on shard 1 while shard 0 held the only slot').toEqual([]);
    /** The ids shard 1's key ran, once it ran, within PROMPTLY_MS (else it throws, naming `what`). */
    const ranOnSecond = async (what: string) => {
      await waitFor(() => rec.idsOf(onSecond!).length > 0, { timeoutMs: PROMPTLY_MS, what: `${what} (drainDelay ${DRAIN_DELAY_S} s)` });
      return rec.idsOf(onSecond!);
    };
    return { worker, release, ranOnSecond };
  }

  it('runs a job whose queue marker a blocking wait took while another shard held the only slot, once that slot frees, long before drainDelay', async () => {
    const { release, ranOnSecond } = await markerTakenWhileSlotHeld();
    // Shard 1's worker must fetch once the slot frees (it waits for the slot), or, had it fetched
    // nothing, not block on the marker again (markNotDrained).
    release.open();
    expect(await ranOnSecond("shard 1's job, though no new marker came")).toEqual(['2']);
  });

  it("runs that job promptly after a pause that cancelled its worker's wait for the slot, and a resume", async () => {
    const { worker, release, ranOnSecond } = await markerTakenWhileSlotHeld();
    // The pause ends shard 1's wait for the slot with no job fetched; the marker is gone.
    const paused = worker.pause();
    release.open();
    await paused;
    await worker.resume();
    expect(await ranOnSecond("shard 1's job after the resume, though no new marker came")).toEqual(['2']);
  });

  it('looks for a job before it blocks again once marked not drained, though a wait took the marker (markNotDrained)', async () => {
    const name = uniqueName('drained');
    const connection = testConnection() as bullmq.ConnectionOptions;
    const queue = track(new bullmq.Queue(name, { connection }));
    const worker = track(new bullmq.Worker(name, null, { connection, autorun: false, drainDelay: DRAIN_DELAY_S }));
    // A fetch that finds nothing leaves BullMQ drained: its next fetch blocks on the queue's marker first.
    const drained = new Promise<void>((resolve) => worker.once('drained', () => resolve()));
    expect(await worker.getNextJob('first'), 'the queue is empty').toBeUndefined();
    await drained;
    const added = await queue.add('job', {});
    // What a shard worker's blocking wait leaves when it then finds no slot: the marker taken, the job waiting.
    expect(await redisClient().zpopmin(queue.keys.marker!), "the job's marker").toHaveLength(2);

    markNotDrained(worker);
    let fetched: bullmq.Job | undefined;
    void worker.getNextJob('second').then((job: bullmq.Job | undefined) => (fetched = job));
    await waitFor(() => fetched, {
      timeoutMs: PROMPTLY_MS,
      what: `the waiting job, with no marker to wake a wait (drainDelay ${DRAIN_DELAY_S} s)`,
    });
    expect(fetched!.id).toBe(added.id);
  });
});
