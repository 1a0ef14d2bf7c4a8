/**
 * `npm run bench:scripts [-- --calls=2000 --rounds=3]`: Redis µs per call of the hot scripts,
 * sent by EVALSHA (the script builds its includes' functions and tables on every call) and by
 * FCALL (the library of functions built them once, when Redis loaded it; see
 * src/storage/scripts/index.ts). Each round runs both on a throwaway redis-server of their own,
 * one after the other; the table gives each figure's median over the rounds.
 *
 * - push to a busy key (its lock held: the push's one call), and to a new key (the call adds the
 *   key's job, BullMQ's addStandardJob inlined): INFO commandstats usec per call;
 * - a claim that acks a slice and claims the next, on a prepared key (many ids pending, the lock
 *   held): INFO commandstats;
 * - a key cycle with a worker (a one-id push to a new key, then its run): the fetch that takes the
 *   key's job and claims its first slice, and the claim that ends the run and completes the job
 *   (BullMQ's moveToFinished inlined), each call timed by SLOWLOG (Redis's own execution time, as
 *   commandstats counts it), since a worker's calls mix the two;
 * - `return 0`, for scale: what any script call costs.
 */
import { Redis } from 'ioredis';
import { batchByKey } from '../src';
import { Keyspace } from '../src/storage/keys';
import { defaultPrefix } from '../src/options';
import { claim } from '../src/storage/protocol';
import { defineScripts, FORCE_EVALSHA_ENV, scriptLibrary, scriptMode } from '../src/storage/scripts';
import { startRedis } from '../tools/redis-server';

const arg = (name: string, fallback: number) => Number(process.argv.find((a) => a.startsWith(`--${name}=`))?.split('=')[1] ?? fallback);
const CALLS = arg('calls', 2000);
const ROUNDS = arg('rounds', 3);
/** Key cycles with a worker: each waits for the last to complete (so its claim fetches no next job). */
const CYCLES = Math.min(CALLS, 500);

type Mode = 'evalsha' | 'functions';
type Figures = Record<string, number>;

/** µs per call of the script calls (FCALL or EVALSHA, ours alone) since the last CONFIG RESETSTAT. */
async function usecPerCall(admin: Redis, mode: Mode): Promise<number> {
  const info = await admin.info('commandstats');
  const line = new RegExp(`^cmdstat_${mode === 'functions' ? 'fcall' : 'evalsha'}:calls=(\\d+),usec=(\\d+)`, 'm').exec(info);
  if (!line) throw new Error(`no ${mode} calls in INFO commandstats`);
  return Number(line[2]) / Number(line[1]);
}

async function measure(mode: Mode): Promise<Figures> {
  if (mode === 'evalsha') process.env[FORCE_EVALSHA_ENV] = '1';
  else delete process.env[FORCE_EVALSHA_ENV];
  const server = await startRedis();
  const admin = new Redis(server.port);
  const client = new Redis(server.port, { maxRetriesPerRequest: null });
  const figures: Figures = {};
  const name = 'calls';
  const keyspace = new Keyspace(defaultPrefix(name, false), name);
  const b = batchByKey({ name, connection: client, eachIteration: () => {} });
  try {
    // Connections, the store's record, the library's load: out of the measurements.
    await b.performBatchLater(['warm-up'], { key: 'busy' });
    if (scriptMode(client) !== mode) throw new Error(`the client runs its scripts by ${scriptMode(client)}, not ${mode}`);

    await admin.set(keyspace.forKey('busy').lock, 'a run', 'PX', 600_000);
    await admin.config('RESETSTAT');
    for (let i = 0; i < CALLS; i++) await b.performBatchLater([`b${i}`], { key: 'busy' });
    figures['push, busy key (commandstats)'] = await usecPerCall(admin, mode);

    await admin.config('RESETSTAT');
    for (let i = 0; i < CALLS; i++) await b.performBatchLater([`n${i}`], { key: `new-${i}` });
    figures['push, new key: adds its job (commandstats)'] = await usecPerCall(admin, mode);

    // The busy key holds CALLS + 1 ids and our lock: each claim acks one and claims the next.
    const names = keyspace.forKey('busy');
    const lock = { value: 'a run', ttlMs: 600_000 };
    await admin.config('RESETSTAT');
    for (let i = 0; i < CALLS; i++) {
      const claimed = await claim(client, 'list', names, { lock, claimId: `c${i}`, settle: 'ack', count: 1 });
      if (!claimed.held || claimed.ids.length !== 1) throw new Error('the prepared key ran dry');
    }
    figures['claim: ack + next slice (commandstats)'] = await usecPerCall(admin, mode);

    // Key cycles with a worker.
    await admin.del(names.lock);
    await admin.flushall();
    const worker = b.createWorker({ concurrency: 1 });
    let onCompleted = () => {};
    worker.on('completed', () => onCompleted());
    const cycle = async (key: string) => {
      const done = new Promise<void>((resolve) => (onCompleted = resolve));
      await b.performBatchLater(['id'], { key });
      await done;
    };
    await cycle('warm-worker');
    await admin.config('SET', 'slowlog-log-slower-than', '0');
    await admin.config('SET', 'slowlog-max-len', '100000');
    await admin.slowlog('RESET');
    for (let i = 0; i < CYCLES; i++) await cycle(`cycle-${i}`);
    const log = (await admin.slowlog('GET', -1)) as [number, number, number, string[]][];
    await admin.config('SET', 'slowlog-log-slower-than', '10000');
    await worker.close();
    const named = scriptNames(client);
    const byScript = new Map<string, number[]>();
    for (const [, , usec, [command, script]] of log) {
      const which = /^fcall$/i.test(command!) ? named.get(script!) : /^evalsha$/i.test(command!) ? named.get(script!) : undefined;
      if (which) byScript.set(which, [...(byScript.get(which) ?? []), usec]);
    }
    const mean = (script: string) => {
      const usecs = byScript.get(script) ?? [];
      if (usecs.length < CYCLES) throw new Error(`${usecs.length} ${script} calls logged for ${CYCLES} cycles`);
      return usecs.reduce((a, u) => a + u, 0) / usecs.length;
    };
    figures['fetch: a key job + its first claim (SLOWLOG)'] = mean('fetch-and-claim');
    figures['claim: the run’s last, completes its job (SLOWLOG)'] = mean('claim-and-finish');

    // `return 0`, for scale.
    await admin.call('FUNCTION', 'LOAD', 'REPLACE', "#!lua name=noop\nredis.register_function('noop', function() return 0 end)");
    const sha = String(await admin.script('LOAD', 'return 0'));
    await admin.config('RESETSTAT');
    for (let i = 0; i < CALLS; i++) await (mode === 'functions' ? client.fcall('noop', 0) : client.evalsha(sha, 0));
    figures['return 0 (commandstats)'] = await usecPerCall(admin, mode);
    return figures;
  } finally {
    await b.close();
    client.disconnect();
    admin.disconnect();
    await server.stop();
  }
}

/** Our scripts by what a call names them with: a function's name, a SHA (ioredis hashes what defineScripts registered). */
function scriptNames(client: Redis): Map<string, string> {
  defineScripts(client);
  const names = new Map<string, string>();
  for (const [script, fn] of scriptLibrary().functions) names.set(fn, script);
  const set = (client as unknown as { scriptsSet: Record<string, { sha: string }> }).scriptsSet;
  for (const [command, script] of Object.entries(set)) {
    const match = /^bbk_[\d_]+?_([a-z_]+)$/.exec(command);
    if (match) names.set(script.sha, match[1]!.replace(/_/g, '-'));
  }
  return names;
}

const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!;

async function main(): Promise<void> {
  const rounds: Record<Mode, Figures[]> = { evalsha: [], functions: [] };
  for (let round = 0; round < ROUNDS; round++) {
    for (const mode of ['evalsha', 'functions'] as const) rounds[mode].push(await measure(mode));
  }
  const redisVersion = (await (async () => {
    const server = await startRedis();
    const admin = new Redis(server.port);
    try {
      return /^redis_version:(\S+)/m.exec(await admin.info('server'))?.[1];
    } finally {
      admin.disconnect();
      await server.stop();
    }
  })()) as string;
  console.log(`Redis ${redisVersion}, ${CALLS} calls (${CYCLES} key cycles), median of ${ROUNDS} rounds: Redis µs per call\n`);
  console.log('| call | EVALSHA µs | FCALL µs | FCALL / EVALSHA |');
  console.log('| ---- | ---------: | -------: | --------------: |');
  for (const label of Object.keys(rounds.evalsha[0]!)) {
    const e = median(rounds.evalsha.map((f) => f[label]!));
    const f = median(rounds.functions.map((f) => f[label]!));
    console.log(`| ${label} | ${e.toFixed(2)} | ${f.toFixed(2)} | ${(f / e).toFixed(2)} |`);
  }
}

main().then(
  () => process.exit(0),
  (err: unknown) => {
    console.error(err);
    process.exit(1);
  },
);
