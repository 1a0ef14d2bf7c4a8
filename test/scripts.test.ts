import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { Cluster } from 'ioredis';
import { describe, expect, it } from 'vitest';
import { bullmqDefinitions, bullmqInclude, BULLMQ_INCLUDES, bullmqScript, INLINED_FROM, INLINED_TO } from '../src/bullmq';
import { Keyspace, laneNames } from '../src/storage/keys';
import { failSlice, sealTicket } from '../src/storage/protocol';
import { argsInclude, argv, SCRIPT_ARGS, type ArgsScript } from '../src/storage/scripts/args';
import { defineScripts, keyspaceInclude, runScript, scriptLibrary, scriptMode, splitScript } from '../src/storage/scripts';
import { keyspaceOf, prefixOf, redisClient, testBatcher, uniqueName } from './helpers/redis';
import { sleep } from './helpers/time';

describe('fail-slice.lua', () => {
  it('is idempotent: a resent call (after a reconnect) does not bring back a part claimed since', async () => {
    const b = testBatcher({ eachIteration: () => {} });
    const names = keyspaceOf(b).forKey('k');
    const redis = redisClient();
    defineScripts(redis);
    await redis.set(names.lock, 'lock-1', 'PX', 60_000);
    await redis.rpush(names.inFlight, 'a', 'b');
    const plan = { retry: [{ id: 'part-0', delayMs: 0, slice: JSON.stringify({ ids: ['a', 'b'] }) }], dead: { ids: [], message: '' } };
    const resend = () => failSlice(redis, names, 0, 'lock-1', plan, 100, 'slice-1:failed');
    expect(await resend()).toEqual([]);
    expect(await redis.zrange(names.retry, 0, -1)).toEqual(['part-0']);
    // Another lane claims the part, then the first call is resent.
    await redis.zrem(names.retry, 'part-0');
    expect(await resend()).toEqual([]);
    expect(await redis.zrange(names.retry, 0, -1)).toEqual([]);
    // Without the lock, nothing changes.
    await redis.set(names.lock, 'someone-else');
    await redis.rpush(names.inFlight, 'c');
    expect(
      await failSlice(redis, names, 0, 'lock-1', { retry: [], dead: { ids: [], message: '' } }, 100, 'slice-2:failed'),
    ).toBeUndefined();
    expect(await redis.lrange(names.inFlight, 0, -1)).toEqual(['c']);
  });

  it('with ack (ctx.fail), acks the ids in neither part in the same call, once: done on their tickets, their data dropped', async () => {
    const b = testBatcher({ eachIteration: () => {} });
    const names = keyspaceOf(b).forKey('k');
    const ticket = `${names.ticketPrefix}t1`;
    const redis = redisClient();
    defineScripts(redis);
    await redis.set(names.lock, 'lock-1', 'PX', 60_000);
    await redis.rpush(names.inFlight, 'a', 'b', 'c', 'd');
    await redis.hset(names.trackedInFlight, { a: 't1', b: 't1', c: 't1', d: 't1' });
    await redis.hset(ticket, { total: 4, done: 0, failed: 0, sealed: '1' });
    await redis.pexpire(ticket, 60_000);
    await redis.hset(names.payloadsInFlight, { a: '{"x":1}\n', b: '{"x":2}\n', c: '{"x":3}\n' });
    const plan = {
      retry: [{ id: 'part-0', delayMs: 0, slice: JSON.stringify({ ids: ['b'] }) }],
      dead: { ids: ['c'], message: "the slice's", messages: ['c, its own'] },
      ack: true as const,
    };
    const resend = () => failSlice(redis, names, 0, 'lock-1', plan, 100, 'slice-1:failed');
    expect(await resend()).toEqual([]);
    expect(await resend()).toEqual([]);
    expect(await redis.hmget(ticket, 'done', 'failed')).toEqual(['2', '1']);
    expect((await redis.lrange(`${ticket}:errors`, 0, -1)).map((e) => JSON.parse(e) as unknown)).toEqual([
      { id: 'c', message: 'c, its own' },
    ]);
    // 'b' waits with its ticket and data for its retry; 'a' and 'd' are done, and nothing stays in flight.
    expect(await redis.hgetall(names.tracked)).toEqual({ b: 't1' });
    expect(await redis.hgetall(names.retryData)).toEqual({ 'part-0\nb': '{"x":2}\n' });
    expect(await redis.exists(names.inFlight, names.trackedInFlight, names.payloadsInFlight)).toBe(0);
  });

  it("settles the slice of the lane it is given, and no other lane's", async () => {
    const b = testBatcher({ eachIteration: () => {} });
    const names = keyspaceOf(b).forKey('k');
    const lane2 = laneNames(names, 2);
    const redis = redisClient();
    defineScripts(redis);
    await redis.set(names.lock, 'lock-1', 'PX', 60_000);
    await redis.rpush(names.inFlight, 'lane-0-id');
    await redis.rpush(lane2.inFlight, 'lane-2-id');
    const plan = { retry: [{ id: 'part-0', delayMs: 0, slice: JSON.stringify({ ids: ['lane-2-id'] }) }], dead: { ids: [], message: '' } };
    expect(await failSlice(redis, names, 2, 'lock-1', plan, 100, 'slice-1:failed')).toEqual([]);
    expect(await redis.exists(lane2.inFlight)).toBe(0);
    expect(await redis.get(lane2.lastClaim)).toBe('slice-1:failed');
    expect(await redis.lrange(names.inFlight, 0, -1)).toEqual(['lane-0-id']);
    expect(await redis.exists(names.lastClaim)).toBe(0);
  });
});

const INCLUDES = join(__dirname, '../src/storage/scripts/includes');

describe('the scripts as one library of Redis functions (Redis 7+)', () => {
  it("builds BullMQ's moveToFinished helpers once in the library: the installed BullMQ's script splits where its body reads KEYS", () => {
    const split = bullmqDefinitions(bullmqScript('moveToFinished').content);
    expect(split, 'the installed BullMQ moveToFinished has a block of helper functions first').toBeDefined();
    expect(split!.body.split('\n')[0]).toMatch(/\bKEYS\[\d+\]/);
    expect((split!.definitions.match(/^local (function )?\w+( = function)?/gm) ?? []).length).toBeGreaterThan(30);
    expect(scriptLibrary().source).toContain('local bullmqComplete\ndo\n');
    // Scripts whose helpers come after code that reads KEYS stay whole, as their own call builds them.
    expect(bullmqDefinitions('local rcall = redis.call\nlocal waitKey = KEYS[1]\nlocal function f() end')).toBeUndefined();
    expect(bullmqDefinitions('local function f()\n  return ARGV[1]\nend\nreturn f()')).toBeUndefined();
  });

  it('builds a script’s includes up to its first line of code once (its prelude), and the rest on every call', () => {
    const source = [
      '--[[',
      '  KEYS[1] ...',
      ']]',
      '--- @include "a"',
      '',
      '--- @include "b"',
      'local x = 1',
      '--- @include "c"',
      'return x',
    ];
    expect(splitScript(source.join('\n'))).toEqual({ prelude: source.slice(0, 6).join('\n'), body: source.slice(6).join('\n') });
    // fetch-and-claim.lua's claim includes are in its prelude: built once per server by a function library.
    const fetch = splitScript(readFileSync(join(INCLUDES, '../fetch-and-claim.lua'), 'utf8'));
    expect(fetch.prelude).toContain('--- @include "bullmq-fetch"');
    expect(fetch.prelude).toContain('--- @include "fused-claim"');
    expect(fetch.body).not.toContain('--- @include');
  });

  it('keeps no state of an include from one call to the next: an include’s top-level local is a function, a constant, a memo, or reset per call', () => {
    const sources = readdirSync(INCLUDES).map((file) => [file, readFileSync(join(INCLUDES, file), 'utf8')] as const);
    sources.push(
      ['keyspace (generated)', keyspaceInclude()],
      // Less BullMQ's own scripts, inlined whole (a function each, built once: see bullmq/lua.ts).
      ...BULLMQ_INCLUDES.map(
        (name) =>
          [
            `bullmq-${name} (generated)`,
            bullmqInclude(name, true).replace(new RegExp(`^${INLINED_FROM}[\\s\\S]*?^${INLINED_TO}.*$`, 'gm'), ''),
          ] as const,
      ),
    );
    const stateful: string[] = [];
    for (const [file, source] of sources) {
      const reset = new Set([...source.matchAll(/^--- @per-call (.+?) =/gm)].flatMap((m) => m[1]!.split(/,\s*/)));
      // A memo (`--- @memo <name> (why)`) holds what every call would build alike.
      for (const [, name] of source.matchAll(/^--- @memo (\w+) \(.+\)$/gm)) reset.add(name!);
      for (const [, names] of source.matchAll(/^local (?!function\b)([\w, ]+?)\s*(?:=|$)/gm)) {
        // An UPPER_CASE local is a constant: built when the library loads, never written after.
        for (const name of names!.split(/,\s*/)) if (!reset.has(name) && !/^[A-Z][A-Z0-9_]*$/.test(name)) stateful.push(`${file}: ${name}`);
      }
    }
    expect(stateful, 'declare it per call with `--- @per-call <name> = <its start value>` after it (see scripts/index.ts)').toEqual([]);
  });

  it('is loaded on the first call, on every master of a Cluster, with one function per script', async () => {
    const redis = redisClient();
    defineScripts(redis);
    const names = new Keyspace(prefixOf(uniqueName()), 'n').forKey('k');
    expect(await runScript(redis, 'due-in', [names.base], ['list'])).toBe(-1);
    expect(scriptMode(redis)).toBe('functions');
    const { name, functions } = scriptLibrary();
    for (const node of redis instanceof Cluster ? redis.nodes('master') : [redis]) {
      const [library] = (await node.call('FUNCTION', 'LIST', 'LIBRARYNAME', name)) as unknown[][];
      const listed = library![library!.indexOf('functions') + 1] as unknown[][];
      expect(listed.map((fn) => fn[fn.indexOf('name') + 1]).sort()).toEqual([...functions.values()].sort());
    }
  });

  it('reads the Redis clock anew on every call', async () => {
    const redis = redisClient();
    defineScripts(redis);
    const names = new Keyspace(prefixOf(uniqueName()), 'n').forKey('k');
    const pause = async () => Number(await runScript(redis, 'pause-key', [names.base], ['k', 60_000]));
    const first = await pause();
    await sleep(50);
    expect((await pause()) - first).toBeGreaterThanOrEqual(40);
  });

  it('answers with the tickets its own call settled, never an earlier call’s', async () => {
    const redis = redisClient();
    defineScripts(redis);
    const names = new Keyspace(prefixOf(uniqueName()), 'n').forKey('k');
    // Two open tickets whose ids are all done: sealing settles each; only the first wants a callback.
    const ticket = { total: 1, done: 1, failed: 0, sealed: '0', ttl: 60_000 };
    await redis.hset(`${names.ticketPrefix}with-cb`, { ...ticket, cb: '1' });
    await redis.hset(`${names.ticketPrefix}without`, { ...ticket, cb: '0' });
    expect(await sealTicket(redis, names, 'with-cb')).toBe('settled');
    // Settled with no callback to add: the call says so only when no earlier call's ticket lingers.
    expect(await sealTicket(redis, names, 'without')).toBe('pending');
    expect(await redis.lrange(names.settledTickets, 0, -1)).toEqual(['with-cb']);
  });
});

describe('script arguments (scripts/args.ts)', () => {
  it('reach each script under their names: the generated Lua reads what `argv` sends, each as its kind', async () => {
    const client = redisClient();
    try {
      const values = (fields: Record<string, string>) =>
        Object.fromEntries(
          Object.entries(fields).map(([name, kind], i) => [
            name,
            kind === 'flag' ? i % 2 === 0 : kind === 'int' ? i * 7 - 3 : `${name}-${i}`,
          ]),
        );
      for (const [script, schema] of Object.entries(SCRIPT_ARGS)) {
        const sent = values(schema.fields);
        const tail = ['tail-1', 'tail-2'];
        const args = argv(script as ArgsScript, sent as never, schema.rest ? tail : []);
        // A table from its function, or the locals the include declares.
        const names = [...Object.keys(schema.fields), ...(schema.rest ? ['rest'] : [])];
        const table = schema.lua === 'locals' ? `{ ${names.map((name) => `${name} = arg_${name}`).join(', ')} }` : `${schema.lua}()`;
        const lua = `${argsInclude(script)}\nlocal a = ${table}\nreturn cjson.encode({ a = a, tail = a.rest and { unpack(ARGV, a.rest) } or {} })`;
        const read = JSON.parse(String(await client.eval(lua, 0, ...args))) as { a: Record<string, unknown>; tail: unknown };
        const { rest, ...named } = read.a;
        expect(named, script).toEqual(sent);
        if (schema.rest) expect([rest, read.tail], script).toEqual([Object.keys(sent).length + 1, tail]);
        else expect(rest, script).toBeUndefined();
      }
    } finally {
      client.disconnect();
    }
  });
});
