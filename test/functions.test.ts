import { Redis } from 'ioredis';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { batchByKey, PushOutcomeUnknownError, type Batcher } from '../src';
import { Keyspace } from '../src/storage/keys';
import { defineScripts, FORCE_EVALSHA_ENV, runScript, scriptLibrary, scriptMode } from '../src/storage/scripts';
import { startRedis, type LocalRedis } from '../tools/redis-server';
import { closeTracked, keyspaceOf, onCluster, Recorder, range, track, uniqueName, waitFor } from './helpers/redis';

/**
 * How the scripts reach Redis (see storage/scripts/index.ts): on Redis 7+ as FCALLs of one library
 * of functions, which a client loads on its first call and again when Redis lost it; elsewhere by
 * EVALSHA, as before. Each test on a redis-server of its own, whose INFO commandstats and SLOWLOG
 * hold only its commands. Standalone only (the Cluster's are in test/cluster/functions.test.ts).
 */
const standaloneOnly = it.skipIf(onCluster());

const servers: LocalRedis[] = [];
afterEach(async () => {
  vi.unstubAllEnvs();
  vi.useRealTimers();
  // Batchers and clients first, while their servers still answer.
  await closeTracked();
  await Promise.all(servers.splice(0).map((server) => server.stop()));
});

async function server(args: string[] = [], port?: number): Promise<LocalRedis> {
  const started = await startRedis(args, port);
  servers.push(started);
  return started;
}

/** Calls per command (INFO commandstats), `function|load` and the like included. */
async function commandCalls(admin: Redis): Promise<Record<string, number>> {
  const info = await admin.info('commandstats');
  return Object.fromEntries([...info.matchAll(/^cmdstat_([^:]+):calls=(\d+)/gm)].map(([, name, calls]) => [name!, Number(calls)]));
}

/** Pushes one id to each of `keys` keys, tracked, and runs a worker until every id ran and every ticket settled. */
async function pushAndRun(b: Batcher, rec: Recorder, keys: number): Promise<void> {
  const tickets = [];
  for (const key of range(keys, 'k-')) tickets.push((await b.performBatchLater([`${key}:a`], { key, track: true })).ticket);
  const worker = b.createWorker({ concurrency: 2 });
  await waitFor(() => rec.all.length === keys, { what: 'every id' });
  for (const ticket of tickets) expect((await b.waitFor(ticket)).done).toBe(1);
  await worker.close();
}

/** The SHAs of our scripts, as ioredis sends them by EVALSHA (defineScripts registered them on `client`). */
function ourShas(client: Redis): Set<string> {
  const scripts = (client as unknown as { scriptsSet: Record<string, { sha: string }> }).scriptsSet;
  return new Set(
    Object.entries(scripts)
      .filter(([command]) => command.startsWith('bbk_'))
      .map(([, script]) => script.sha),
  );
}

describe('scripts as Redis functions', () => {
  standaloneOnly('are FCALLs of one library, loaded once, and never sent by EVALSHA; a second process finds it loaded', async () => {
    const redis = await server();
    const admin = track(new Redis(redis.port));
    await admin.config('SET', 'slowlog-log-slower-than', '0');
    await admin.config('SET', 'slowlog-max-len', '100000');
    const client = track(new Redis(redis.port, { maxRetriesPerRequest: null }));
    const rec = new Recorder();
    const b = track(batchByKey({ name: uniqueName(), connection: client, eachIteration: rec.handler }));
    await pushAndRun(b, rec, 20);
    expect(scriptMode(client)).toBe('functions');
    const calls = await commandCalls(admin);
    expect(calls['function|load']).toBe(1);
    // 20 pushes, fetches that claimed, claims that completed: fused BullMQ calls are ours.
    expect(calls.fcall).toBeGreaterThanOrEqual(40);
    const log = (await admin.slowlog('GET', -1)) as [number, number, number, string[]][];
    const shas = ourShas(client);
    expect(shas.size).toBeGreaterThan(0);
    expect(log.filter(([, , , [command, sha]]) => /^eval/i.test(command!) && shas.has(String(sha)))).toEqual([]);
    const functions = new Set(log.filter(([, , , [command]]) => /^fcall$/i.test(command!)).map(([, , , args]) => args[1]));
    expect([...functions].every((name) => name!.startsWith(`${scriptLibrary().name}_`))).toBe(true);
    // The fused fetch and completion are ours only on the fast path (CI also runs the suite with it off).
    const fast = process.env.BATCH_BY_KEY_FAST_PATH !== 'off';
    for (const script of fast ? (['fetch-and-claim', 'claim-and-finish'] as const) : (['claim'] as const)) {
      expect(functions).toContain(scriptLibrary().functions.get(script));
    }

    // Another process (another client) of the same library: it looks, finds it, loads nothing.
    const other = track(new Redis(redis.port));
    defineScripts(other);
    expect(await runScript(other, 'due-in', [new Keyspace('q', 'q').forKey('k').base], ['list'])).toBe(-1);
    expect(scriptMode(other)).toBe('functions');
    expect((await commandCalls(admin))['function|load']).toBe(1);
  });

  standaloneOnly(
    'a Redis restarted without persistence: the next call finds no function, loads the library and is sent again',
    async () => {
      const first = await server();
      const client = track(new Redis(first.port, { maxRetriesPerRequest: null, retryStrategy: () => 50 }));
      client.on('error', () => {});
      const rec = new Recorder();
      const b = track(batchByKey({ name: uniqueName(), connection: client, eachIteration: rec.handler }));
      await b.performBatchLater(['lost'], { key: 'k' });
      expect(scriptMode(client)).toBe('functions');
      await first.stop();
      const again = await server([], first.port);
      const admin = track(new Redis(again.port));
      expect(await admin.call('FUNCTION', 'LIST')).toEqual([]);
      await b.performBatchLater(['1', '2'], { key: 'k' });
      b.createWorker();
      await waitFor(() => rec.all.length === 2, { what: 'the ids pushed after the restart' });
      expect(rec.idsOf('k')).toEqual(['1', '2']);
      const calls = await commandCalls(admin);
      expect(calls['function|load']).toBe(1);
      // The one refused (function not found) and the one sent again, then the worker's.
      expect(calls.fcall).toBeGreaterThanOrEqual(3);
      expect((await admin.info('commandstats')).match(/^cmdstat_fcall:.*failed_calls=(\d+)/m)?.[1]).toBe('1');
    },
  );

  standaloneOnly(
    'a bulk push that finds its function gone stored its ids: it rejects with PushOutcomeUnknownError, its key in the recovery index',
    async () => {
      const redis = await server();
      const admin = track(new Redis(redis.port));
      const client = track(new Redis(redis.port, { maxRetriesPerRequest: null }));
      const rec = new Recorder();
      const b = track(batchByKey({ name: uniqueName(), connection: client, eachIteration: rec.handler }));
      await b.performBatchLater(['first'], { key: 'other' });
      expect(scriptMode(client)).toBe('functions');
      await admin.call('FUNCTION', 'FLUSH');
      // A bulk push's ids go by RPUSH before its script, in one MULTI (storage/protocol.ts bulkPush).
      const bulk = range(1000);
      await expect(b.performBatchLater(bulk, { key: 'bulk' })).rejects.toBeInstanceOf(PushOutcomeUnknownError);
      expect(await b.backlog('bulk')).toEqual({ pending: 1000, inFlight: 0, retrying: 0 });
      expect(await admin.zscore(keyspaceOf(b).index, 'bulk'), 'the key in the recovery index').not.toBeNull();
      // The library is loaded again: the next bulk push is whole, and every stored id runs.
      await b.performBatchLater(range(1000, 'x'), { key: 'bulk' });
      b.createWorker();
      await waitFor(() => rec.idsOf('bulk').length === 2000, { what: 'both bulk pushes' });
      expect(rec.idsOf('bulk')).toEqual([...bulk, ...range(1000, 'x')]);
    },
  );

  standaloneOnly(
    'forced to EVALSHA (as on Redis 6.2): pushes, fused fetches and completions, tickets, and SCRIPT FLUSH as before',
    async () => {
      vi.stubEnv(FORCE_EVALSHA_ENV, '1');
      const redis = await server();
      const admin = track(new Redis(redis.port));
      const client = track(new Redis(redis.port, { maxRetriesPerRequest: null }));
      const rec = new Recorder();
      const b = track(batchByKey({ name: uniqueName(), connection: client, eachIteration: rec.handler }));
      await pushAndRun(b, rec, 10);
      expect(scriptMode(client)).toBe('evalsha');
      await admin.script('FLUSH');
      await b.performBatchLater(['after-flush'], { key: 'k-0' });
      b.createWorker();
      await waitFor(() => rec.all.length === 11, { what: 'the id pushed after SCRIPT FLUSH' });
      const calls = await commandCalls(admin);
      expect(calls.fcall).toBeUndefined();
      expect(Object.keys(calls).filter((name) => name.startsWith('function|'))).toEqual([]);
      expect(calls.evalsha).toBeGreaterThanOrEqual(20);
      // After the flush, each script's first call on the connection is an EVAL of its source (ioredis on NOSCRIPT).
      expect(calls.eval).toBeGreaterThanOrEqual(1);
    },
  );

  /** Runs three ids through a batcher on `client`, and checks that the client went by EVALSHA. */
  async function runsByEvalsha(client: Redis): Promise<Recorder> {
    const rec = new Recorder();
    const b = track(batchByKey({ name: uniqueName(), connection: client, eachIteration: rec.handler }));
    await pushAndRun(b, rec, 3);
    expect(scriptMode(client)).toBe('evalsha');
    return rec;
  }

  /** A client logged in as `app`, a user of `rules` on a Redis of its own (and an admin client of that Redis). */
  async function restrictedUser(...rules: string[]): Promise<{ restricted: Redis; admin: Redis }> {
    const redis = await server();
    const admin = track(new Redis(redis.port));
    await admin.call('ACL', 'SETUSER', 'app', 'reset', 'on', '>pw', ...rules);
    return { restricted: track(new Redis({ port: redis.port, username: 'app', password: 'pw', maxRetriesPerRequest: null })), admin };
  }

  standaloneOnly('a Redis without the FUNCTION command, and a user who may not load functions, run the scripts by EVALSHA', async () => {
    const renamed = await server(['--rename-command', 'FUNCTION', '']);
    await runsByEvalsha(track(new Redis(renamed.port, { maxRetriesPerRequest: null })));
    expect((await commandCalls(track(new Redis(renamed.port)))).fcall).toBeUndefined();

    const { restricted, admin } = await restrictedUser('~*', '&*', '+@all', '-function');
    await runsByEvalsha(restricted);
    expect(await admin.call('FUNCTION', 'LIST')).toEqual([]);
  });

  standaloneOnly('a user who may load functions but not call them, and a Redis without FCALL, run the scripts by EVALSHA', async () => {
    const renamed = await server(['--rename-command', 'FCALL', '']);
    await runsByEvalsha(track(new Redis(renamed.port, { maxRetriesPerRequest: null })));

    // docs/redis.md's rules, less FCALL.
    const rules =
      '+@read +@write +@scripting +@connection +@transaction +@keyspace +@pubsub -@dangerous +time +info +client|setname -fcall';
    const { restricted } = await restrictedUser('~bull:*', 'resetchannels', '&bull:*', ...rules.split(' '));
    expect((await runsByEvalsha(restricted)).all.sort()).toEqual(['k-0:a', 'k-1:a', 'k-2:a']);
  });

  standaloneOnly(
    'out of memory: a read runs (by EVALSHA until the library can load; as a no-writes function after), a write is refused',
    async () => {
      const redis = await server(['--maxmemory-policy', 'noeviction']);
      const admin = track(new Redis(redis.port));
      const client = track(new Redis(redis.port));
      defineScripts(client);
      const names = new Keyspace('q', 'q').forKey('k');
      const dueIn = () => runScript(client, 'due-in', [names.base], ['list']);
      const pause = () => runScript(client, 'pause-key', [names.base], ['k', 1000]);
      await admin.config('SET', 'maxmemory', '1');
      // The load is refused (FUNCTION LOAD may grow memory): the read goes by EVALSHA for now.
      expect(await dueIn()).toBe(-1);
      expect(scriptMode(client)).toBeUndefined();
      expect(await admin.call('FUNCTION', 'LIST')).toEqual([]);
      await admin.config('SET', 'maxmemory', '0');
      // Until the retry is due the client does not try again; then it loads.
      vi.useFakeTimers({ toFake: ['Date'] });
      vi.setSystemTime(Date.now() + 11_000);
      expect(await dueIn()).toBe(-1);
      expect(scriptMode(client)).toBe('functions');
      await admin.config('SET', 'maxmemory', '1');
      expect(await dueIn()).toBe(-1);
      await expect(pause()).rejects.toThrow(/OOM/);
      await admin.config('SET', 'maxmemory', '0');
      expect(await pause()).toMatch(/^\d+$/);
    },
  );
});
