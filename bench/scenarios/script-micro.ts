import { createHash } from 'node:crypto';
import { Redis } from 'ioredis';
import { batchByKey, type KeyWorker } from '../../src';
import { FORCE_EVALSHA_ENV, scriptSource, type ScriptName } from '../../src/storage/scripts';
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
        return { ...evalsha, fcall: (await measure(redis, n)).scripts };
      }),
      config.scriptMicro.timeoutMs,
      'script-micro',
    );
    const { floor, scripts, fcall } = measured;
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
        'includes are built once per server, not per call (so it pays no prelude beyond the call itself).',
      columns: [
        { key: 'script', label: 'script' },
        { key: 'calls', label: 'calls' },
        { key: 'us', label: 'EVALSHA µs/call', digits: 1 },
        { key: 'fcall', label: 'FCALL µs/call', digits: 1 },
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
          commands: 0,
          prelude: null,
          beyond: null,
          floorWithArgs: null,
        },
      ],
      ratios: scripts.map((m, i) => ({
        name: `${m.script} (${m.label}): FCALL / EVALSHA µs`,
        value: ratio(fcall[i]?.usPerCall, m.usPerCall),
      })),
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
    scripts.push(await script('push: one id to an idle key', 'push', (i) => batcher.performBatchLater([`${i}`], { key: `idle-${i}` })));
    const jobs: Job[] = [];
    scripts.push(
      await script("fetch: a waiting key job, the run's first claim", 'fetch-and-claim', async (i) =>
        jobs.push(await getNext(`fetch-${i}`)),
      ),
    );
    scripts.push(await script("claim: the run's last, completes its job", 'claim-and-finish', (i) => run(jobs[i]!, `fetch-${i}`, false)));

    // A backlog of n + 1 waiting key jobs; the first is fetched, and each run's last claim fetches the next.
    for (let i = 0; i <= n; i++) await batcher.performBatchLater([`${i}`], { key: `backlog-${i}` });
    let job = await getNext('chain');
    scripts.push(
      await script("claim: the run's last, completes its job, fetches and claims the next", 'claim-and-finish', async (i) => {
        const next = await run(job, 'chain', true);
        if (!next) throw new Error(`script-micro: the completion of job ${i} of the backlog fetched no next job`);
        job = next;
      }),
    );
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
