import { Cluster } from 'ioredis';
import { Worker, type ConnectionOptions } from 'bullmq';
import { describe, expect, it } from 'vitest';
import {
  batchByKey,
  BatchByKey,
  BatchByKeyError,
  DEFAULTS,
  InvalidIdsError,
  InvalidKeyError,
  InvalidOptionError,
  MAX_ID_LENGTH,
  MAX_KEY_LENGTH,
  MissingKeyError,
  WORKER_DEFAULTS,
  type BatchByKeyOptions,
} from '../src';
import { resolveOptions } from '../src/options';
import fc from 'fast-check';
import { dashboard } from '../src';
import { keysMatching, prefixOf, testBatcher, testConnection, track, uniqueName } from './helpers/redis';

/** Never connected to: the options below are refused or resolved before any connection. */
const connection = () => ({ host: '127.0.0.1', port: 1 });
const unconnectedCluster = new Cluster([{ host: '127.0.0.1', port: 1 }], { lazyConnect: true });

describe('bad input is refused before anything reaches Redis', () => {
  const cases: [string, unknown, Record<string, unknown>, new (...a: never[]) => BatchByKeyError, string, RegExp][] = [
    ['a non-array', 'abc', { key: 'k' }, InvalidIdsError, 'ERR_INVALID_IDS', /must be an array/],
    ['null', null, { key: 'k' }, InvalidIdsError, 'ERR_INVALID_IDS', /must be an array/],
    [
      'an object id without data',
      [{ id: 1 }],
      { key: 'k' },
      InvalidIdsError,
      'ERR_INVALID_IDS',
      /ids\[0\] must be a string, a finite number or \{ id, data \}/,
    ],
    [
      'data that is not JSON',
      [{ id: 1, data: () => 1 }],
      { key: 'k' },
      InvalidIdsError,
      'ERR_INVALID_IDS',
      /ids\[0\]\.data is not JSON-serialisable/,
    ],
    [
      'data with a BigInt',
      [{ id: 1, data: { n: 1n } }],
      { key: 'k' },
      InvalidIdsError,
      'ERR_INVALID_IDS',
      /ids\[0\]\.data is not JSON-serialisable: .*BigInt/,
    ],
    [
      'data over MAX_DATA_BYTES',
      [{ id: 1, data: 'x'.repeat(70_000) }],
      { key: 'k' },
      InvalidIdsError,
      'ERR_INVALID_IDS',
      /ids\[0\]\.data is 70002 bytes as JSON; the limit is 65536/,
    ],
    ['NaN', ['a', Number.NaN], { key: 'k' }, InvalidIdsError, 'ERR_INVALID_IDS', /ids\[1\]/],
    ['Infinity', [Infinity], { key: 'k' }, InvalidIdsError, 'ERR_INVALID_IDS', /finite/],
    ['an empty id', ['a', ''], { key: 'k' }, InvalidIdsError, 'ERR_INVALID_IDS', /ids\[1\] is an empty string/],
    ['an id over the limit', ['x'.repeat(MAX_ID_LENGTH + 1)], { key: 'k' }, InvalidIdsError, 'ERR_INVALID_IDS', /limit is 1024/],
    ['a lone surrogate id', ['\uD800'], { key: 'k' }, InvalidIdsError, 'ERR_INVALID_IDS', /surrogate/],
    ['a missing key', ['a'], {}, MissingKeyError, 'ERR_MISSING_KEY', /withKey/],
    ['an empty key', ['a'], { key: '' }, InvalidKeyError, 'ERR_INVALID_KEY', /non-empty string/],
    ['a key over the limit', ['a'], { key: 'k'.repeat(MAX_KEY_LENGTH + 1) }, InvalidKeyError, 'ERR_INVALID_KEY', /limit is 1024/],
    ['a non-string key', ['a'], { key: 42 }, InvalidKeyError, 'ERR_INVALID_KEY', /number 42/],
    ['delayMs on a list store', ['a'], { key: 'k', delayMs: 10 }, InvalidOptionError, 'ERR_INVALID_OPTION', /needs store 'zset'/],
  ];

  it.each(cases)('%s', async (_label, ids, opts, ErrorClass, code, message) => {
    const b = testBatcher({ eachIteration: () => {} });
    const err = await b.performBatchLater(ids as string[], opts).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ErrorClass);
    expect(err).toBeInstanceOf(BatchByKeyError);
    expect((err as BatchByKeyError).code).toBe(code);
    expect((err as Error).message).toMatch(message);
    expect((err as Error).name).toBe(ErrorClass.name);
    expect(await keysMatching(`*${b.name}*`)).toEqual([]);
  });

  it('refuses a key resolver that returns a non-string', async () => {
    const b = testBatcher({ eachIteration: () => {}, key: () => 7 as unknown as string });
    await expect(b.performBatchLater(['a'])).rejects.toThrow(InvalidKeyError);
  });

  it('refuses a bad delayMs on a zset store', async () => {
    const b = testBatcher({ eachIteration: () => {}, store: 'zset' });
    await expect(b.performBatchLater(['a'], { key: 'k', delayMs: -1 })).rejects.toThrow(/delayMs must be an integer >= 0, got number -1/);
    expect(await keysMatching(`*${b.name}*`)).toEqual([]);
  });
});

describe('invalid options throw InvalidOptionError at definition', () => {
  const base = (): BatchByKeyOptions & { eachIteration: () => void } => ({ name: 'ok', connection: connection(), eachIteration: () => {} });
  const cases: [string, Record<string, unknown>, RegExp][] = [
    ['sliceSize 0', { sliceSize: 0 }, /options.sliceSize must be an integer between 1 and 10000, got number 0/],
    ['sliceSize over the cap', { sliceSize: 1e9 }, /options.sliceSize must be an integer between 1 and 10000/],
    ['sliceSize 1.5', { sliceSize: 1.5 }, /options.sliceSize/],
    ['maxRuntimeMs 0', { maxRuntimeMs: 0 }, /options.maxRuntimeMs must be an integer between 1 and 2147483647, got number 0/],
    // Node fires a timer longer than 2^31 - 1 ms after 1 ms: every slice would "time out" at once.
    ['maxRuntimeMs past the longest timer', { maxRuntimeMs: 3e9 }, /options.maxRuntimeMs must be an integer between 1 and 2147483647/],
    [
      'sliceTimeoutMs past the longest timer',
      { sliceTimeoutMs: 2 ** 31 },
      /options.sliceTimeoutMs must be an integer between 1 and 2147483647/,
    ],
    ['lockTtlMs past the longest timer', { lockTtlMs: 7e9 }, /options.lockTtlMs must be an integer between 1000 and 2147483647/],
    ['pushTimeoutMs 0', { pushTimeoutMs: 0 }, /options.pushTimeoutMs must be an integer between 1 and 2147483647, got number 0/],
    [
      'recoveryIntervalMs past the longest timer',
      { recoveryIntervalMs: 2 ** 31 },
      /options.recoveryIntervalMs must be an integer between 100 and 2147483647/,
    ],
    [
      'an infinite backoff delay',
      { backoff: { type: 'exponential', delayMs: Infinity } },
      /options.backoff must be .* delays between 0 and 2147483647 ms/,
    ],
    [
      'a backoff maxDelayMs past the longest timer',
      { backoff: { type: 'exponential', delayMs: 5, maxDelayMs: 2 ** 40 } },
      /options.backoff must be/,
    ],
    ['a NaN fixed backoff', { backoff: { type: 'fixed', delayMs: Number.NaN } }, /options.backoff must be/],
    ['maxRuntimeMs negative', { maxRuntimeMs: -5 }, /options.maxRuntimeMs/],
    ['lockTtlMs too short', { lockTtlMs: 10 }, /options.lockTtlMs must be an integer between 1000 and 2147483647/],
    ['an unknown store', { store: 'queue' }, /options.store must be one of 'list', 'set', 'zset', got "queue"/],
    ['an empty name', { name: '' }, /options.name must be 1-100 letters/],
    ['a name with a colon', { name: 'a:b' }, /options.name/],
    ['a non-function eachIteration', { eachIteration: 'nope' }, /options.eachIteration must be a function/],
    [
      'a rateLimit of 0',
      { rateLimit: { max: 0, durationMs: 1000 } },
      /options.rateLimit must be \{ max, durationMs \} with integers between 1 and 2147483647/,
    ],
    ['a missing connection', { connection: undefined }, /options.connection is required/],
    ['a non-function key resolver', { key: 'acct' }, /options.key must be a function/],
    ['attempts 0', { attempts: 0 }, /options.attempts must be an integer >= 1/],
    ['a bad backoff', { backoff: { type: 'linear', delayMs: 5 } }, /options.backoff must be/],
    ['an empty prefix', { prefix: '' }, /options.prefix must be a non-empty string/],
    ['a non-boolean isolateFailures', { isolateFailures: 'yes' }, /options.isolateFailures must be a boolean, got "yes"/],
    ['concurrencyPerKey 17', { concurrencyPerKey: 17 }, /options.concurrencyPerKey must be an integer between 1 and 16, got number 17/],
    ['an unknown scheduling', { scheduling: 'lottery' }, /options.scheduling must be one of 'fair', 'fifo', got "lottery"/],
    ['a non-function weight', { weight: 3 }, /options.weight must be a function \(key\) => number, got number 3/],
    ['maxDeadLetters 0', { maxDeadLetters: 0 }, /options.maxDeadLetters must be an integer >= 1/],
    ['ticketTtlMs too short', { ticketTtlMs: 5 }, /options.ticketTtlMs must be an integer >= 1000/],
    ['a non-function around', { around: [() => Promise.resolve(), 'log'] }, /options.around must be a middleware/],
    [
      'a Cluster prefix without a hash tag',
      { connection: unconnectedCluster, prefix: 'bull' },
      /must contain a \{hash tag\} on a Redis Cluster/,
    ],
    ['a Cluster prefix whose first tag is empty', { connection: unconnectedCluster, prefix: '{}{app}' }, /must contain a \{hash tag\}/],
  ];
  it.each(cases)('%s', (_label, override, message) => {
    const make = () => batchByKey({ ...base(), ...override });
    expect(make).toThrow(InvalidOptionError);
    expect(make).toThrow(message);
  });

  it('on a Cluster, picks a prefix tagged with the name unless one is given', () => {
    const resolve = (extra: Partial<BatchByKeyOptions>) =>
      resolveOptions({ name: 'orders', connection: unconnectedCluster, eachIteration: () => {}, ...extra }).prefix;
    expect(resolve({})).toBe('bull:{orders}');
    expect(resolve({ prefix: '{app}' })).toBe('{app}');
    expect(resolveOptions({ name: 'orders', connection: connection(), eachIteration: () => {} }).prefix).toBe('bull');
  });

  it("createWorker refuses a Cluster connection when the batcher's prefix has no hash tag", () => {
    const b = batchByKey({ name: 'plain', connection: connection(), eachIteration: () => {} });
    expect(() => b.createWorker({ connection: unconnectedCluster })).toThrow(
      /createWorker got a Redis Cluster connection, but the batcher's prefix "bull" has no \{hash tag\}/,
    );
  });

  it('the class form validates when the class is defined', () => {
    expect(() => BatchByKey({ name: 'ok', connection: connection(), sliceSize: -1 })).toThrow(InvalidOptionError);
  });

  it('documents its defaults', () => {
    expect(DEFAULTS).toEqual({
      store: 'list',
      sliceSize: 100,
      concurrencyPerKey: 1,
      maxRuntimeMs: 300_000,
      scheduling: 'fair',
      lockTtlMs: 30_000,
      shutdownTimeoutMs: 10_000,
      attempts: 5,
      backoff: { type: 'exponential', delayMs: 1000, maxDelayMs: 60_000 },
      isolateFailures: true,
      maxDeadLetters: 10_000,
      ticketTtlMs: 86_400_000,
      prefix: 'bull',
      shards: 1,
      recoveryIntervalMs: 60_000,
      pushTimeoutMs: 10_000,
      pushesPerCall: 100,
      pushLingerMs: 0,
      history: { intervalMs: 10_000, retentionMs: 3_600_000, topKeys: 5 },
      fastPath: 'auto',
    });
  });

  it('documents the defaults createWorker sets over BullMQ', () => {
    expect(WORKER_DEFAULTS).toEqual({ stalledInterval: 15_000 });
  });

  it('a non-object options value is refused', () => {
    expect(() => batchByKey(null as never)).toThrow(/options must be an object, got null/);
  });
});

describe("BullMQ's names and worker options", () => {
  it("names our spelling when given BullMQ's: backoff's delay is delayMs, rateLimit's duration is durationMs", () => {
    const base = { name: uniqueName(), connection: testConnection(), eachIteration: () => {} };
    expect(() => batchByKey({ ...base, backoff: { type: 'fixed', delay: 100 } } as never)).toThrow(
      /options\.backoff must be .*BullMQ's `delay` is `delayMs` here/,
    );
    expect(() => batchByKey({ ...base, rateLimit: { max: 10, duration: 1000 } } as never)).toThrow(
      /options\.rateLimit must be .*BullMQ's `duration` is `durationMs` here/,
    );
  });

  it.each([
    ['limiter', { max: 10, duration: 1000 }, /counts jobs.*use the batcher's rateLimit/],
    ['maxStartedAttempts', 1, /starts again each time its run yields/],
    ['skipStalledCheck', true, /how the keys of a worker that died/],
    ['skipLockRenewal', true, /takes it for stalled while it runs/],
    ['useWorkerThreads', true, /BullMQ's sandbox is for a processor file/],
  ] as const)('createWorker refuses %s with InvalidOptionError saying why, before any write', async (name, value, why) => {
    const b = testBatcher({ eachIteration: () => {} });
    const thrown = () => b.createWorker({ [name]: value, autorun: false });
    expect(thrown).toThrow(InvalidOptionError);
    expect(thrown).toThrow(new RegExp(`createWorker options: ${name} is not supported: `));
    expect(thrown).toThrow(why);
    expect(await keysMatching(`*${b.name}*`)).toEqual([]);
  });

  it('passes the other BullMQ worker options through, and takes an off switch of a refused one', async () => {
    const b = testBatcher({ eachIteration: () => {} });
    const worker = b.createWorker({ autorun: false, maxStalledCount: 3, drainDelay: 2, lockDuration: 45_000, skipStalledCheck: false });
    expect(worker.opts).toMatchObject({ maxStalledCount: 3, drainDelay: 2, lockDuration: 45_000, skipStalledCheck: false });
    await worker.close();
  });

  it("attach refuses a Worker of the caller's built with a refused option", () => {
    const b = testBatcher({ eachIteration: () => {} });
    const worker = track(
      new Worker(b.name, b.processor(), {
        connection: testConnection() as ConnectionOptions,
        prefix: prefixOf(b.name),
        autorun: false,
        limiter: { max: 1, duration: 1000 },
      }),
    );
    expect(() => b.attach(worker)).toThrow(/attach: the worker's options: limiter is not supported/);
  });
});

describe('unknown options', () => {
  it('are refused with InvalidOptionError naming the closest known option, wherever options are taken, before any write', async () => {
    const typo = (thrown: () => unknown, name: string, closest: string) =>
      expect(thrown).toThrow(new RegExp(`unknown option "${name}"; did you mean ${closest}\\?`));
    const base = { name: uniqueName(), connection: testConnection(), eachIteration: () => {} };
    typo(() => batchByKey({ ...base, maxRuntimMs: 5 } as never), 'maxRuntimMs', 'maxRuntimeMs');
    const b = testBatcher({ eachIteration: () => {} });
    typo(() => b.createWorker({ concurency: 4 } as never), 'concurency', 'concurrency');
    typo(() => dashboard({ batchers: [b], readOnyl: false } as never), 'readOnyl', 'readOnly');
    await expect(b.performBatchLater(['1'], { key: 'k', delayMS: 5 } as never)).rejects.toThrow(/did you mean delayMs\?/);
    await expect(b.pause('k', { forMS: 5 } as never)).rejects.toThrow(/did you mean forMs\?/);
    await expect(b.waitFor('k.t', { timeout: 5 } as never)).rejects.toThrow(/did you mean timeoutMs\?/);
    // Something no option resembles gets the list instead.
    expect(() => batchByKey({ ...base, zzz: 1 } as never)).toThrow(InvalidOptionError);
    expect(await keysMatching(`*${b.name}*`)).toEqual([]);
  });

  it('any misspelling of a batchByKey option is refused; every known option is taken (fast-check)', () => {
    const known = ['maxRuntimeMs', 'sliceSize', 'lockTtlMs', 'recoveryIntervalMs', 'pushTimeoutMs', 'concurrencyPerKey'];
    fc.assert(
      fc.property(fc.constantFrom(...known), fc.nat(), fc.constantFrom('drop', 'double', 'swap'), (name, at, how) => {
        const i = at % name.length;
        const typo =
          how === 'drop'
            ? name.slice(0, i) + name.slice(i + 1)
            : how === 'double'
              ? name.slice(0, i) + name[i] + name.slice(i)
              : name.slice(0, i) + (name[i + 1] ?? '') + name[i] + name.slice(i + 2);
        fc.pre(typo !== name);
        expect(() => batchByKey({ name: 'props', connection: testConnection(), eachIteration: () => {}, [typo]: 5 })).toThrow(
          InvalidOptionError,
        );
      }),
    );
  });
});
