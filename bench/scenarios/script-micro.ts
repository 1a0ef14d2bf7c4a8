import { createHash } from 'node:crypto';
import { Queue, Worker } from 'bullmq';
import { Redis } from 'ioredis';
import { batchByKey, type KeyWorker } from '../../src';
import { defaultPrefix } from '../../src/options';
import { Keyspace } from '../../src/storage/keys';
import { claim } from '../../src/storage/protocol';
import { defineScripts, FORCE_EVALSHA_ENV, scriptSource, type ScriptName } from '../../src/storage/scripts';
import { ratio } from '../lib/stats';
import { withTimeout } from '../lib/clock';
import { readCommandStats, resetCommandStats, scriptSplit, type ScriptSplit } from '../lib/commandstats';
import { newTarget } from '../lib/fill';
import { preludeSource } from '../lib/prelude';
import { recordScriptCalls, type ScriptCall } from '../lib/record';
import { withFreshRedis, type BenchRedis } from '../lib/redis';
import { fmtInt, progress } from './common';
import type { Scenario } from './types';

const sha1 = (text: string) => createHash('sha1').update(text).digest('hex');

/** The floor: a script that does nothing. */
const RETURN_0 = 'return 0';

/**
 * A script's calls are split in this many rounds, each timed on its own and followed by its
 * prelude's and `return 0`'s, and the median round is reported: a slow patch of a shared machine
 * then moves one round, not the figure, and hits the script and its prelude alike.
 */
const ROUNDS = 5;

/** What Redis counted over one pass of calls, per call. */
interface Pass {
  calls: number;
  usPerCall: number;
  commandsPerCall: number;
  split: ScriptSplit;
}

/** One round of a hot script: its calls as the library made them, then its prelude and `return 0` with the same arguments. */
interface Round {
  real: Pass;
  /** The calls of the script the library sent in the round (any other script call shows in `real.calls`). */
  sent: number;
  prelude: Pass;
  floorWithArgs: Pass;
}

interface Measured {
  label: string;
  script: ScriptName;
  /** BullMQ's script that does this call's work for one plain job, if any (see `Counterparts`). */
  counterpart?: keyof Counterparts;
  /** The issue 46 budget: FCALL µs per call, absolute or over the counterpart's. */
  budget?: { us: number; over?: true };
  /** Script calls INFO counted, and calls of the script sent, over every round. */
  calls: number;
  sent: number;
  /** Medians of the rounds' µs per call. */
  usPerCall: number;
  prelude: number;
  floorWithArgs: number;
  commandsPerCall: number;
  rounds: Round[];
}

/** The median of some rounds' figure (the lower middle for an even count). */
const median = (values: readonly number[]): number => [...values].sort((a, b) => a - b)[Math.floor((values.length - 1) / 2)] ?? Number.NaN;

/** Rounds of `calls` calls in all: the first call's index and the end of each. */
const roundsOf = (calls: number): [number, number][] =>
  Array.from({ length: ROUNDS }, (_, r) => [Math.floor((r * calls) / ROUNDS), Math.floor(((r + 1) * calls) / ROUNDS)]);

/** INFO commandstats reset before `fn`, read after it. */
async function pass(redis: BenchRedis, fn: () => Promise<unknown>): Promise<Pass> {
  await resetCommandStats(redis);
  await fn();
  const split = scriptSplit(await readCommandStats(redis));
  const calls = Math.max(1, split.scriptCalls);
  return { calls: split.scriptCalls, usPerCall: split.scriptUsec / calls, commandsPerCall: split.innerCalls / calls, split };
}

/** The calls again, one at a time, to the script of SHA1 `sha` (loaded beforehand): the same keys and arguments. */
async function replay(redis: BenchRedis, caller: Redis, sha: string, calls: readonly ScriptCall[]): Promise<Pass> {
  return pass(redis, async () => {
    for (const args of calls) await caller.call('evalsha', sha, ...args.slice(1));
  });
}

/**
 * The hot scripts of one id per key, each on its own, as Redis sees them: INFO commandstats usec
 * per call (reset before each pass; in Redis 7 a script's usec includes the commands it runs).
 * The library runs as a user runs it (batchByKey, createWorker, defaults), driven one call at a
 * time: pushes of one id to idle keys; BullMQ's getNextJob of their waiting jobs (fetch-and-claim.lua,
 * which makes each run's first claim); processJob of each (its run's last claim: claim-and-finish.lua acks
 * the id, finds nothing, releases the lock and completes the job, with no next job to fetch); and
 * runs in a chain (processJob of a job whose completion fetches and claims the next one, as in a
 * drain with a backlog). Every script call of a pass is recorded as ioredis sent it, and sent
 * again to the script's prelude (its source returning 0 where its own body begins, after its
 * top-level includes) and to `return 0`, so the prelude and the floor get the very same keys and
 * arguments.
 */
export const scriptMicro: Scenario = {
  id: 'script-micro',
  async run(config) {
    const n = config.scriptMicro.calls;
    progress(`${fmtInt(n)} calls per script`);
    const measured = await withTimeout(
      withFreshRedis(async (redis) => {
        // The EVALSHA path first (forced, as on a Redis without functions), then the library's own: FCALL on Redis 7.
        process.env[FORCE_EVALSHA_ENV] = '1';
        const evalsha = await measure(redis, n).finally(() => delete process.env[FORCE_EVALSHA_ENV]);
        const fcalls = (await measure(redis, n)).scripts;
        return { ...evalsha, fcall: fcalls, counterparts: await bullmqCounterparts(redis, n) };
      }),
      config.scriptMicro.timeoutMs,
      'script-micro',
    );
    const { floor, scripts, fcall, counterparts } = measured;
    const notes = scripts
      .filter((m) => m.calls !== n || m.sent !== n)
      .map(
        (m) => `${m.label}: ${fmtInt(m.sent)} calls of ${m.script}.lua sent and ${fmtInt(m.calls)} script calls counted, not ${fmtInt(n)}`,
      );
    return {
      id: 'script-micro',
      title: 'Script microbenchmark: µs per call of the hot scripts',
      setup:
        `A fresh redis-server; the library as a user runs it (defaults, list store), driven one call at a time, ${fmtInt(n)} calls ` +
        `per script in ${ROUNDS} rounds (the median round is shown). push.lua: a push of one id to an idle key (it adds the key's job). ` +
        "fetch-and-claim.lua: BullMQ's getNextJob of a waiting key job (moveToActive and the run's first claim). claim-and-finish.lua: the run's last claim " +
        '(acks the id, finds nothing, releases the lock and completes the job; no job waits, so none is fetched), and the same with a ' +
        'backlog (the completion fetches the next job and makes its first claim). µs/call: INFO commandstats usec / calls of EVALSHA, ' +
        'reset before each round (in Redis 7 with the commands the script ran); commands/call: those it ran. Prelude: the same script ' +
        "returning 0 where its own body begins (after its top-level includes), sent the round's recorded keys and arguments again; so " +
        'is `return 0` (with its arguments). The floor: `return 0` with no keys or arguments. Each is measured twice: with EVALSHA ' +
        '(forced, as on a Redis without functions) and as the library runs it on Redis 7, FCALL of its function library, whose ' +
        'includes are built once per server, not per call (so it pays no prelude beyond the call itself). ' +
        "BullMQ's counterpart: the same number of plain BullMQ jobs of one id on the same server, in the same run, by EVALSHA as " +
        'BullMQ sends them, the median of as many rounds: `Queue.add` (addStandardJob), `getNextJob` (moveToActive), `processJob` ' +
        'completing with no next job and with one waiting (moveToFinished). Budget: the FCALL µs per call issue 46 sets, absolute ' +
        "or over BullMQ's counterpart in the same run.",
      columns: [
        { key: 'script', label: 'script' },
        { key: 'calls', label: 'calls' },
        { key: 'us', label: 'EVALSHA µs/call', digits: 1 },
        { key: 'fcall', label: 'FCALL µs/call', digits: 1 },
        { key: 'bullmq', label: "BullMQ's counterpart µs/call", digits: 1 },
        { key: 'budget', label: 'budget FCALL µs/call', digits: 1 },
        { key: 'commands', label: 'commands/call', digits: 1 },
        { key: 'prelude', label: 'EVALSHA prelude µs', digits: 1 },
        { key: 'beyond', label: 'EVALSHA µs beyond prelude', digits: 1 },
        { key: 'floorWithArgs', label: '`return 0` with its arguments µs', digits: 1 },
      ],
      rows: [
        ...scripts.map((m, i) => ({
          script: m.label,
          calls: m.calls,
          us: m.usPerCall,
          fcall: fcall[i]?.usPerCall ?? null,
          bullmq: m.counterpart ? `${counterparts[m.counterpart].toFixed(1)} (${m.counterpart})` : null,
          budget: budgetOf(m, counterparts) ?? null,
          commands: m.commandsPerCall,
          prelude: m.prelude,
          beyond: m.usPerCall - m.prelude,
          floorWithArgs: m.floorWithArgs,
        })),
        {
          script: '`return 0` (the floor)',
          calls: floor.calls,
          us: floor.usPerCall,
          fcall: null,
          bullmq: null,
          budget: null,
          commands: 0,
          prelude: null,
          beyond: null,
          floorWithArgs: null,
        },
      ],
      ratios: [
        ...scripts.map((m, i) => ({
          name: `${m.script} (${m.label}): FCALL / EVALSHA µs`,
          value: ratio(fcall[i]?.usPerCall, m.usPerCall),
        })),
        ...scripts.flatMap((m, i) =>
          m.counterpart
            ? [{ name: `${m.label}: FCALL µs / BullMQ's ${m.counterpart}`, value: ratio(fcall[i]?.usPerCall, counterparts[m.counterpart]) }]
            : [],
        ),
        ...scripts.flatMap((m, i) => {
          const budget = budgetOf(m, counterparts);
          return budget === undefined
            ? []
            : [{ name: `${m.label}: FCALL µs over its budget`, value: (fcall[i]?.usPerCall ?? Number.NaN) - budget }];
        }),
      ],
      notes: [
        "the prelude runs Redis's setup of the call (KEYS and ARGV) and the top-level code of the script's includes (their " +
          'functions and tables are built on every call); `return 0` with its arguments, the setup alone',
        ...notes,
      ],
      details: measured,
    };
  },
};

async function measure(redis: BenchRedis, n: number): Promise<{ floor: { calls: number; usPerCall: number }; scripts: Measured[] }> {
  const target = newTarget(redis);
  const batcher = batchByKey({ name: target.namespace, connection: redis.url, eachIteration: () => undefined });
  const caller = new Redis(redis.url, { maxRetriesPerRequest: null });
  try {
    // Slots for every fetched job that is not run yet (see engine/slots.ts): all of a pass's.
    const worker = batcher.createWorker({ concurrency: n + 2, autorun: false });
    await worker.waitUntilReady();
    const { getNext, run } = driver(worker);
    // Each script once, so every later call is an EVALSHA of a script Redis holds.
    await batcher.performBatchLater(['warm'], { key: 'warm' });
    await run(await getNext('warm'), 'warm', false);

    const load = async (lua: string) => String(await redis.admin.script('LOAD', lua));
    const floorSha = await load(RETURN_0);
    /** `call(i)` for i from 0 to n - 1, in rounds; each round's calls of `name` sent again to its prelude and to `return 0`. */
    const script = async (label: string, name: ScriptName, call: (i: number) => Promise<unknown>): Promise<Measured> => {
      const sha = sha1(scriptSource(name));
      const preludeSha = await load(preludeSource(name));
      const done: Round[] = [];
      for (const [from, to] of roundsOf(n)) {
        let real: Pass | undefined;
        const recorded = await recordScriptCalls(async () => {
          real = await pass(redis, async () => {
            for (let i = from; i < to; i++) await call(i);
          });
        });
        const sent = recorded.calls.get(sha) ?? [];
        done.push({
          real: real!,
          sent: sent.length,
          prelude: await replay(redis, caller, preludeSha, sent),
          floorWithArgs: await replay(redis, caller, floorSha, sent),
        });
      }
      const sum = (pick: (r: Round) => number) => done.reduce((total, r) => total + pick(r), 0);
      const calls = sum((r) => r.real.calls);
      return {
        label,
        script: name,
        calls,
        sent: sum((r) => r.sent),
        usPerCall: median(done.map((r) => r.real.usPerCall)),
        prelude: median(done.map((r) => r.prelude.usPerCall)),
        floorWithArgs: median(done.map((r) => r.floorWithArgs.usPerCall)),
        commandsPerCall: sum((r) => r.real.split.innerCalls) / Math.max(1, calls),
        rounds: done,
      };
    };

    const scripts: Measured[] = [];
    scripts.push({
      ...(await script('push: one id to an idle key', 'push', (i) => batcher.performBatchLater([`${i}`], { key: `idle-${i}` }))),
      counterpart: 'addStandardJob',
      budget: { us: 10, over: true },
    });
    // Their jobs wait (nothing fetched them): each push is covered by its key's waiting job.
    scripts.push({
      ...(await script('push: one id to a key whose job waits', 'push', (i) => batcher.performBatchLater([`w${i}`], { key: `idle-${i}` }))),
      budget: { us: 8 },
    });
    const jobs: Job[] = [];
    scripts.push({
      ...(await script("fetch: a waiting key job, the run's first claim", 'fetch-and-claim', async (i) =>
        jobs.push(await getNext(`fetch-${i}`)),
      )),
      counterpart: 'moveToActive',
      budget: { us: 12, over: true },
    });
    scripts.push({
      ...(await script("claim: the run's last, completes its job", 'claim-and-finish', (i) => run(jobs[i]!, `fetch-${i}`, false))),
      counterpart: 'moveToFinished',
      budget: { us: 15, over: true },
    });

    // A plain key with a backlog, held by a run: each claim acks the id it claimed last and claims the next.
    const plain = new Keyspace(defaultPrefix(target.namespace, false), target.namespace).forKey('plain');
    for (let i = 0; i <= n; i += 1000) {
      await batcher.performBatchLater(
        Array.from({ length: Math.min(1000, n + 1 - i) }, (_, j) => `p${i + j}`),
        { key: 'plain' },
      );
    }
    const lock = { value: 'a run', ttlMs: 600_000 };
    await redis.admin.set(plain.lock, lock.value, 'PX', lock.ttlMs);
    defineScripts(caller);
    scripts.push({
      ...(await script('claim: a plain key, acks a slice of one id and claims the next', 'claim', async (i) => {
        const claimed = await claim(caller, 'list', plain, { lock, claimId: `c${i}`, settle: 'ack', count: 1 });
        if (!claimed.held || claimed.ids.length !== 1) throw new Error('script-micro: the plain key ran dry');
      })),
      budget: { us: 12 },
    });

    // A backlog of n + 1 waiting key jobs; the first is fetched, and each run's last claim fetches the next.
    for (let i = 0; i <= n; i++) await batcher.performBatchLater([`${i}`], { key: `backlog-${i}` });
    let job = await getNext('chain');
    scripts.push({
      ...(await script("claim: the run's last, completes its job, fetches and claims the next", 'claim-and-finish', async (i) => {
        const next = await run(job, 'chain', true);
        if (!next) throw new Error(`script-micro: the completion of job ${i} of the backlog fetched no next job`);
        job = next;
      })),
      counterpart: 'moveToFinished, fetching the next',
    });
    await run(job, 'chain', false);

    const floors: Pass[] = [];
    for (const [from, to] of roundsOf(n)) {
      floors.push(
        await pass(redis, async () => {
          for (let i = from; i < to; i++) await caller.evalsha(floorSha, 0);
        }),
      );
    }
    const floor = { calls: floors.reduce((total, p) => total + p.calls, 0), usPerCall: median(floors.map((p) => p.usPerCall)) };
    return { floor, scripts };
  } finally {
    caller.disconnect();
    await withTimeout(batcher.close(), 10_000, 'script-micro batcher close');
  }
}

type Job = Awaited<ReturnType<KeyWorker['getNextJob']>>;

/** BullMQ's own calls on the library's worker: a fetch that does not block, and a job's processing (its run). */
function driver(worker: KeyWorker) {
  return {
    getNext: async (token: string): Promise<Job> => {
      const job = await worker.getNextJob(token, { block: false });
      if (!job) throw new Error(`script-micro: getNextJob (${token}) fetched no job`);
      return job;
    },
    run: async (job: Job, token: string, fetchNext: boolean): Promise<Job | undefined> =>
      (await worker.processJob(job, token, () => fetchNext)) ?? undefined,
  };
}

/** BullMQ's scripts for one plain job of one id, µs per call (EVALSHA, as BullMQ sends them; see `bullmqCounterparts`). */
interface Counterparts {
  addStandardJob: number;
  moveToActive: number;
  moveToFinished: number;
  'moveToFinished, fetching the next': number;
}

/** A row's budget in µs, from the counterparts measured in the same run; undefined without one. */
function budgetOf(m: Measured, counterparts: Counterparts): number | undefined {
  if (!m.budget) return undefined;
  if (!m.budget.over) return m.budget.us;
  return m.counterpart ? counterparts[m.counterpart] + m.budget.us : undefined;
}

/**
 * What BullMQ's own scripts cost for the same work on one plain job of one id, on the same server
 * in the same run: `n` adds (`Queue.add`: addStandardJob), fetches (`getNextJob`: moveToActive),
 * completions with nothing to fetch (`processJob`: moveToFinished), then a chain in which each
 * completion fetches the next job. Each in rounds; the median round's µs per call.
 */
async function bullmqCounterparts(redis: BenchRedis, n: number): Promise<Counterparts> {
  const name = `${newTarget(redis).namespace}-bullmq`;
  const connection = { url: redis.url, maxRetriesPerRequest: null };
  const queue = new Queue<{ ids: string[] }>(name, { connection });
  const worker = new Worker<{ ids: string[] }>(name, () => Promise.resolve(undefined), { connection, autorun: false, concurrency: n + 2 });
  const options = { removeOnComplete: true, removeOnFail: 1000 };
  try {
    await queue.waitUntilReady();
    await worker.waitUntilReady();
    await queue.add('warm', { ids: ['warm'] }, options);
    const warm = await worker.getNextJob('warm', { block: false });
    if (warm) await worker.processJob(warm, 'warm', () => false);
    const timed = async (call: (i: number) => Promise<unknown>): Promise<number> => {
      const rounds: number[] = [];
      for (const [from, to] of roundsOf(n)) {
        rounds.push(
          (
            await pass(redis, async () => {
              for (let i = from; i < to; i++) await call(i);
            })
          ).usPerCall,
        );
      }
      return median(rounds);
    };
    const addStandardJob = await timed((i) => queue.add('work', { ids: [`${i}`] }, options));
    const jobs: NonNullable<Awaited<ReturnType<typeof worker.getNextJob>>>[] = [];
    const moveToActive = await timed(async (i) => {
      const job = await worker.getNextJob(`t${i}`, { block: false });
      if (!job) throw new Error('script-micro: BullMQ fetched no job');
      jobs.push(job);
    });
    const moveToFinished = await timed((i) => worker.processJob(jobs[i]!, `t${i}`, () => false));
    for (let i = 0; i <= n; i++) await queue.add('work', { ids: [`${i}`] }, options);
    let job = await worker.getNextJob('chain', { block: false });
    if (!job) throw new Error('script-micro: BullMQ fetched no job');
    const chained = await timed(async () => {
      const next = await worker.processJob(job, 'chain', () => true);
      if (!next) throw new Error('script-micro: a BullMQ completion fetched no next job');
      job = next;
    });
    return { addStandardJob, moveToActive, moveToFinished, 'moveToFinished, fetching the next': chained };
  } finally {
    await worker.close(true);
    await queue.close();
  }
}
