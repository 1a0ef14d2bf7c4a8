import { Redis } from 'ioredis';
import { describe, expect, it } from 'vitest';
import {
  batchByKey,
  ClosedError,
  InvalidOptionError,
  PushOutcomeUnknownError,
  PushTimeoutError,
  WrongTypeError,
  type Batcher,
} from '../src';
import { startRedis } from '../tools/redis-server';
import { keyspaceOf, onCluster, queueOf, range, redisClient, testBatcher, track, uniqueName } from './helpers/redis';

/**
 * What a push's promise says of its ids (issue 45, items 11, 13-16, 18 and 30): never "not
 * stored" for ids Redis stored, typed errors for what Redis refused, and push order per key.
 */
const standaloneOnly = it.skipIf(onCluster());

/** Holds the event loop for `ms`: as a burst of pushes or a long handler would, while Redis answers. */
function busy(ms: number): void {
  const until = Date.now() + ms;
  while (Date.now() < until) {
    // A busy event loop: nothing to do but wait.
  }
}

describe('push outcomes', () => {
  it('refuses pushLingerMs at or above pushTimeoutMs before anything touches Redis (item 18)', () => {
    for (const pushLingerMs of [1_000, 2_000]) {
      expect(() => batchByKey({ name: uniqueName(), connection: 'redis://127.0.0.1:1', pushTimeoutMs: 1_000, pushLingerMs })).toThrow(
        InvalidOptionError,
      );
    }
    expect(() =>
      batchByKey({ name: uniqueName(), connection: 'redis://127.0.0.1:1', pushTimeoutMs: 1_000, pushLingerMs: 999 }),
    ).not.toThrow();
  });

  standaloneOnly(
    'a push whose reply is in the socket when its deadline fires resolves, and its ids are stored once (item 11)',
    async () => {
      const server = await startRedis();
      const admin = new Redis(server.port);
      try {
        const client = track(new Redis(server.port));
        const b = track(batchByKey({ name: uniqueName(), connection: client, pushTimeoutMs: 500 }));
        // The store check and the script's load, before the push the test holds.
        await b.performBatchLater(['a'], { key: 'k' });
        let hold = false;
        const send = client.sendCommand.bind(client);
        client.sendCommand = (...args: Parameters<typeof send>) => {
          const sent = send(...args);
          // The push's script call is written: Redis answers while the event loop is held past the deadline.
          if (hold && /^(fcall|evalsha|eval)$/i.test(args[0].name)) {
            hold = false;
            busy(1_000);
          }
          return sent;
        };
        hold = true;
        const result = await b.performBatchLater(['b'], { key: 'k' }).catch((e: unknown) => e);
        expect(hold).toBe(false);
        expect(result).toMatchObject({ key: 'k', pushed: 1 });
        expect(await admin.lrange(keyspaceOf(b).forKey('k').pending, 0, -1)).toEqual(['a', 'b']);
      } finally {
        admin.disconnect();
        await server.stop();
      }
    },
  );

  standaloneOnly('a push sent and not answered within pushTimeoutMs says its outcome is unknown (item 11)', async () => {
    const server = await startRedis();
    const admin = new Redis(server.port);
    try {
      const b = track(batchByKey({ name: uniqueName(), connection: server.url, pushTimeoutMs: 300 }));
      await b.performBatchLater(['a'], { key: 'k' });
      await admin.call('CLIENT', 'PAUSE', '1000', 'WRITE');
      const error = await b.performBatchLater(['b'], { key: 'k' }).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(PushOutcomeUnknownError);
      expect(error).toMatchObject({ code: 'ERR_PUSH_TIMEOUT', message: expect.stringMatching(/cannot tell whether Redis stored its ids/) });
    } finally {
      admin.disconnect();
      await server.stop();
    }
  });

  it('a push to a closed port times out with the connection error as its cause (item 30)', async () => {
    const nowhere = track(batchByKey({ name: uniqueName(), connection: 'redis://127.0.0.1:1', pushTimeoutMs: 300 }));
    const error = await nowhere.performBatchLater(['c'], { key: 'k' }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(PushTimeoutError);
    expect((error as Error).cause).toMatchObject({ message: expect.stringMatching(/ECONNREFUSED/) });
  });

  it('a bulk push keeps its place behind smaller pushes to its key fired before it (item 14)', async () => {
    const redis = redisClient();
    const b = testBatcher({ eachIteration: () => {} });
    await b.performBatchLater(['warm'], { key: 'warm' });
    const bulk = range(600, 'bulk-');
    await Promise.all([
      b.performBatchLater(['first'], { key: 'k' }),
      b.performBatchLater(['second'], { key: 'k' }),
      b.performBatchLater(bulk, { key: 'k' }),
    ]);
    expect(await redis.lrange(keyspaceOf(b).forKey('k').pending, 0, -1)).toEqual(['first', 'second', ...bulk]);
  });

  it('a push to an open ticket keeps its place behind a push to its key fired before it (item 14)', async () => {
    const redis = redisClient();
    const b = testBatcher({ eachIteration: () => {} });
    const ticket = await b.openTicket('k');
    await Promise.all([b.performBatchLater(['first'], { key: 'k' }), b.performBatchLater(['second'], { ticket })]);
    expect(await redis.lrange(keyspaceOf(b).forKey('k').pending, 0, -1)).toEqual(['first', 'second']);
  });

  standaloneOnly('a push that close() overtakes before it was sent rejects with ClosedError, and stored nothing (item 15)', async () => {
    const redis = redisClient();
    let release: () => void = () => {};
    const gate = new Promise<void>((resolve) => (release = resolve));
    let resolving = false;
    const b: Batcher = track(
      batchByKey({
        name: uniqueName(),
        connection: { port: (redis as Redis).options.port! },
        pushTimeoutMs: 200,
        eachIteration: () => {},
        // The push waits here, before anything is sent, until the batcher is closed.
        key: async () => {
          if (resolving) await gate;
          return 'k';
        },
      }),
    );
    await b.performBatchLater(['warm']);
    resolving = true;
    const pushing = b.performBatchLater(['x']).catch((e: unknown) => e);
    await b.close();
    release();
    const error = await pushing;
    expect(error).toBeInstanceOf(ClosedError);
    expect(error).not.toBeInstanceOf(PushOutcomeUnknownError);
    expect(await redis.llen(keyspaceOf(b).forKey('k').pending)).toBe(1);
  });

  it('a tracked push to a key whose tracked hash has the wrong type writes nothing and rejects with WrongTypeError (item 13)', async () => {
    const redis = redisClient();
    const b = testBatcher({ eachIteration: () => {} });
    const names = keyspaceOf(b).forKey('k');
    await redis.set(names.tracked, 'a string, so HSET fails');
    const error = await b.performBatchLater(['1', '2'], { key: 'k', track: true }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(WrongTypeError);
    expect(error).toMatchObject({ code: 'ERR_WRONG_TYPE', message: expect.stringContaining(names.tracked) });
    expect(await redis.exists(names.pending, names.pushMarks)).toBe(0);
    expect(await queueOf(b).getJobCounts('wait', 'delayed', 'prioritized')).toEqual({ wait: 0, delayed: 0, prioritized: 0 });
  });

  it('a push to a list key whose push marks have the wrong type writes nothing and rejects with WrongTypeError (item 13)', async () => {
    const redis = redisClient();
    const b = testBatcher({ eachIteration: () => {} });
    const names = keyspaceOf(b).forKey('k');
    await redis.hset(names.pushMarks, 'f', 'v');
    await expect(b.performBatchLater(['1'], { key: 'k' })).rejects.toThrow(WrongTypeError);
    expect(await redis.exists(names.pending)).toBe(0);
  });

  standaloneOnly(
    'a push that a waiting job covers, its recovery index of the wrong type, writes nothing and rejects with WrongTypeError',
    async () => {
      const redis = redisClient();
      const b = testBatcher({ eachIteration: () => {} });
      const names = keyspaceOf(b).forKey('k');
      // The key's job waits: the next push lists the key, the write after its ids that fails.
      await b.performBatchLater(['1', '2'], { key: 'k' });
      await redis.del(keyspaceOf(b).index);
      await redis.set(keyspaceOf(b).index, 'a string, so ZADD fails');
      await expect(b.performBatchLater(['3'], { key: 'k' })).rejects.toThrow(WrongTypeError);
      expect(await redis.lrange(names.pending, 0, -1)).toEqual(['1', '2']);
      // The same with pending empty before the push: its lag mark goes too.
      await redis.del(names.pending, names.pushMarks);
      await expect(b.performBatchLater(['4'], { key: 'k' })).rejects.toThrow(WrongTypeError);
      expect(await redis.exists(names.pending, names.pushMarks)).toBe(0);
    },
  );

  standaloneOnly(
    'a bulk push refused for a key of the wrong type rejects with WrongTypeError and leaves no index entry (item 16)',
    async () => {
      const redis = redisClient();
      const b = testBatcher({ eachIteration: () => {} });
      const names = keyspaceOf(b).forKey('k');
      await b.performBatchLater(['warm'], { key: 'warm' });
      await redis.set(names.pending, 'a string, so RPUSH fails');
      await expect(b.performBatchLater(range(600), { key: 'k' })).rejects.toThrow(WrongTypeError);
      expect(await redis.zscore(keyspaceOf(b).index, 'k')).toBeNull();
    },
  );

  standaloneOnly("a bulk push refused for memory rejects with Redis's OOM error, not EXECABORT (item 16)", async () => {
    const server = await startRedis();
    const admin = new Redis(server.port);
    try {
      const b = track(batchByKey({ name: uniqueName(), connection: server.url }));
      await b.performBatchLater(['warm'], { key: 'warm' });
      await admin.config('SET', 'maxmemory', '1');
      const error = await b.performBatchLater(range(600), { key: 'k' }).catch((e: unknown) => e);
      expect(error).toMatchObject({ name: 'ReplyError', message: expect.stringMatching(/^OOM/) });
      await admin.config('SET', 'maxmemory', '0');
      expect(await admin.exists(keyspaceOf(b).forKey('k').pending)).toBe(0);
    } finally {
      admin.disconnect();
      await server.stop();
    }
  });
});
