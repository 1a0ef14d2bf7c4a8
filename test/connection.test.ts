import { once } from 'node:events';
import { createServer, connect, type AddressInfo, type Socket } from 'node:net';
import { Redis } from 'ioredis';
import { describe, expect, it } from 'vitest';
import { Worker } from 'bullmq';
import { BatchByKey, batchByKey, ClosedError, InvalidOptionError, PushOutcomeUnknownError, PushTimeoutError, type Batcher } from '../src';
import { fromUrl } from '../src/core/connection';
import { scriptLibrary } from '../src/storage/scripts';
import { startRedis } from '../tools/redis-server';
import { keyspaceOf, Recorder, parseUrl, redisUrl, track, uniqueName, waitFor } from './helpers/redis';

/** The users the server's clients are logged in as (CLIENT LIST's `user=` fields), this admin's own left out. */
async function usersConnected(admin: Redis): Promise<string[]> {
  const self = await admin.client('ID');
  const lines = String(await admin.call('CLIENT', 'LIST'))
    .split('\n')
    .filter((line) => line !== '' && !line.startsWith(`id=${self} `));
  return lines.map((line) => /(?:^| )user=(\S*)/.exec(line)?.[1] ?? '');
}

/**
 * A TCP proxy to a Redis on `port` that, once told `dropNextReply()`, closes the client's
 * connection instead of passing on the server's next reply: Redis ran the command, its client
 * never hears back.
 */
async function replyDroppingProxy(port: number): Promise<{ port: number; dropNextReply(): void; close(): Promise<void> }> {
  let drop = false;
  const sockets = new Set<Socket>();
  const proxy = createServer((downstream) => {
    const upstream = connect(port, '127.0.0.1');
    for (const socket of [downstream, upstream]) {
      sockets.add(socket);
      socket.on('error', () => {});
      socket.on('close', () => {
        sockets.delete(socket);
        downstream.destroy();
        upstream.destroy();
      });
    }
    downstream.on('data', (chunk) => upstream.write(chunk));
    upstream.on('data', (chunk) => {
      if (!drop) return void downstream.write(chunk);
      drop = false;
      downstream.destroy();
    });
  });
  await new Promise<void>((resolve) => proxy.listen(0, '127.0.0.1', resolve));
  return {
    port: (proxy.address() as AddressInfo).port,
    dropNextReply: () => void (drop = true),
    close: () =>
      new Promise<void>((resolve) => {
        for (const socket of sockets) socket.destroy();
        proxy.close(() => resolve());
      }),
  };
}

describe('connection', () => {
  it("never puts a URL's password in an error message, even when the URL does not parse", () => {
    const make = () => batchByKey({ name: 'q', connection: 'redis://admin:s3cr3t@127.0.0.1:99999', eachIteration: () => {} });
    expect(make).toThrow(InvalidOptionError);
    expect(make).toThrow('redis://admin:***@127.0.0.1:99999');
    expect(make).not.toThrow(/s3cr3t/);
  });

  it('takes a Redis URL', async () => {
    const rec = new Recorder();
    const b = track(batchByKey({ name: uniqueName(), connection: redisUrl(), eachIteration: rec.handler }));
    await b.performBatchLater(['a'], { key: 'k' });
    // The push reached the server the URL names: another client of it sees the id waiting.
    const other = track(new Redis(redisUrl()));
    expect(await other.llen(keyspaceOf(b).forKey('k').pending)).toBe(1);
    b.createWorker();
    await waitFor(() => rec.all.length === 1, { what: 'the id' });
    expect(rec.calls.map((c) => [c.key, c.ids])).toEqual([['k', ['a']]]);
  });

  it('createWorker takes its own connection, a URL too', async () => {
    // A server of its own, where the worker's URL logs in as a user nothing else uses: the
    // connections of that user show that the worker connected with its URL, not the batcher's.
    const server = await startRedis();
    const admin = new Redis(server.port);
    const rec = new Recorder();
    const b = batchByKey({ name: uniqueName(), connection: { port: server.port }, eachIteration: rec.handler });
    try {
      await admin.call('ACL', 'SETUSER', 'worker', 'on', '>pw', '~*', '&*', '+@all');
      await b.performBatchLater(['a'], { key: 'k' });
      expect(await usersConnected(admin)).not.toContain('worker');
      b.createWorker({ connection: `redis://worker:pw@127.0.0.1:${server.port}` });
      await waitFor(() => rec.all.length === 1, { what: 'the id' });
      expect(rec.calls.map((c) => [c.key, c.ids])).toEqual([['k', ['a']]]);
      expect(await usersConnected(admin)).toContain('worker');
    } finally {
      // Its worker too, before the server goes.
      await b.close();
      await admin.quit();
      await server.stop();
    }
  });

  it('takes an ioredis client, and leaves it open on close()', async () => {
    const rec = new Recorder();
    const client = track(new Redis({ ...parseUrl(redisUrl()), maxRetriesPerRequest: null }));
    const b = batchByKey({ name: uniqueName(), connection: client, eachIteration: rec.handler });
    const worker = b.createWorker();
    await b.performBatchLater(['a'], { key: 'k' });
    await waitFor(() => rec.all.length === 1);
    await worker.close();
    await b.close();
    expect(await client.ping()).toBe('PONG');
  });

  it('parses user, password, database and TLS from a URL', () => {
    expect(fromUrl('rediss://me:p%40ss@cache.example:6380/3')).toEqual({
      host: 'cache.example',
      port: 6380,
      db: 3,
      username: 'me',
      password: 'p@ss',
      tls: {},
    });
    expect(fromUrl('redis://localhost')).toEqual({ host: 'localhost', port: 6379, db: 0 });
  });

  it('a push rejects with PushTimeoutError within pushTimeoutMs when Redis is gone, instead of hanging', async () => {
    const server = await startRedis();
    const b = track(
      batchByKey({ name: uniqueName(), connection: `redis://127.0.0.1:${server.port}`, pushTimeoutMs: 300, eachIteration: () => {} }),
    );
    await b.performBatchLater(['a'], { key: 'k' });
    await server.stop();
    const error = await b.performBatchLater(['b'], { key: 'k' }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(PushTimeoutError);
    expect(error).toMatchObject({ code: 'ERR_PUSH_TIMEOUT' });
    // Never reachable at all: the same, not a hang.
    const nowhere = track(
      batchByKey({ name: uniqueName(), connection: 'redis://127.0.0.1:1', pushTimeoutMs: 300, eachIteration: () => {} }),
    );
    await expect(nowhere.performBatchLater(['c'], { key: 'k' })).rejects.toThrow(PushTimeoutError);
    await expect(nowhere.performBatchLater([], { key: 'k', track: true })).rejects.toThrow(PushTimeoutError);
  });

  /**
   * A batcher behind a proxy that can drop a reply (and the connection with it), its first push
   * made and answered, so the next reply is the next push's. No resend after a reconnect: what
   * was unanswered when the connection closed rejects.
   */
  async function droppingNextReply(options: { pushLingerMs?: number }, run: (b: Batcher, admin: Redis) => Promise<void>): Promise<void> {
    const server = await startRedis();
    const proxy = await replyDroppingProxy(server.port);
    const admin = new Redis(server.port);
    try {
      const client = track(new Redis({ port: proxy.port, maxRetriesPerRequest: 0 }));
      client.on('error', () => {});
      const b = track(batchByKey({ name: uniqueName(), connection: client, ...options }));
      await b.performBatchLater(['a'], { key: 'k' });
      // Everything the batcher and its queue sent has been answered: the next reply is the push's.
      await client.ping();
      proxy.dropNextReply();
      await run(b, admin);
    } finally {
      admin.disconnect();
      await proxy.close();
      await server.stop();
    }
  }

  it('a push whose connection closes after Redis ran its script rejects with PushOutcomeUnknownError: its ids were stored', async () => {
    await droppingNextReply({}, async (b, admin) => {
      const error = await b.performBatchLater(['b', 'c'], { key: 'k' }).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(PushOutcomeUnknownError);
      expect(error).not.toBeInstanceOf(PushTimeoutError);
      expect(error).toMatchObject({ code: 'ERR_PUSH_OUTCOME_UNKNOWN', message: expect.stringMatching(/may have been stored/) });
      expect((error as Error).cause).toBeInstanceOf(Error);
      // It did land: the rejected push's ids wait for a worker beside the first push's.
      expect(await admin.lrange(keyspaceOf(b).forKey('k').pending, 0, -1)).toEqual(['a', 'b', 'c']);
    });
  });

  it('a shared push call whose connection closes before Redis answered rejects each of its pushes with PushOutcomeUnknownError', async () => {
    // The linger gathers the pushes below into one call (group commit).
    await droppingNextReply({ pushLingerMs: 100 }, async (b, admin) => {
      const keys = ['k-1', 'k-2', 'k-3'];
      const errors = await Promise.all(keys.map((key) => b.performBatchLater([key], { key }).catch((e: unknown) => e)));
      for (const error of errors) {
        expect(error).toBeInstanceOf(PushOutcomeUnknownError);
        expect(error).toMatchObject({ message: expect.stringMatching(/may have been stored/) });
      }
      // The call ran: each push's id waits for a worker.
      for (const key of keys) expect(await admin.lrange(keyspaceOf(b).forKey(key).pending, 0, -1)).toEqual([key]);
    });
  });

  it("Redis's refusal of a call ioredis sent again after a reconnect is no proof: the first one ran, the push rejects with PushOutcomeUnknownError", async () => {
    const server = await startRedis();
    const proxy = await replyDroppingProxy(server.port);
    const admin = new Redis(server.port);
    try {
      await admin.call('ACL', 'SETUSER', 'app', 'on', '>pw', '~*', '&*', '+@all');
      // ioredis' defaults: what was unanswered when the connection closed is sent again once it is back.
      const client = track(new Redis({ port: proxy.port, username: 'app', password: 'pw', retryStrategy: () => 300 }));
      client.on('error', () => {});
      const b = track(batchByKey({ name: uniqueName(), connection: client }));
      await b.performBatchLater(['a'], { key: 'k' });
      await client.ping();
      const closed = once(client, 'close');
      proxy.dropNextReply();
      const pushing = b.performBatchLater(['b', 'c'], { key: 'k' }).catch((e: unknown) => e);
      await closed;
      // Before the reconnect: the call sent again is refused (NOPERM), after the first one ran.
      await admin.call('ACL', 'SETUSER', 'app', '-evalsha', '-eval', '-fcall');
      const error = await pushing;
      expect(error).toBeInstanceOf(PushOutcomeUnknownError);
      expect((error as Error).cause).toMatchObject({ name: 'ReplyError', message: expect.stringMatching(/^NOPERM/) });
      expect(await admin.lrange(keyspaceOf(b).forKey('k').pending, 0, -1)).toEqual(['a', 'b', 'c']);
    } finally {
      admin.disconnect();
      await proxy.close();
      await server.stop();
    }
  });

  it('a push Redis holds past pushTimeoutMs rejects with PushTimeoutError, a PushOutcomeUnknownError, and lands when Redis answers', async () => {
    const server = await startRedis();
    const admin = new Redis(server.port);
    try {
      const b = track(batchByKey({ name: uniqueName(), connection: server.url, pushTimeoutMs: 300 }));
      await b.performBatchLater(['a'], { key: 'k' });
      // Redis takes the push's script call but runs no writing command for 1.5 s.
      await admin.call('CLIENT', 'PAUSE', '1500', 'WRITE');
      const error = await b.performBatchLater(['b'], { key: 'k' }).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(PushTimeoutError);
      expect(error).toBeInstanceOf(PushOutcomeUnknownError);
      expect(error).toMatchObject({ code: 'ERR_PUSH_TIMEOUT' });
      const pending = keyspaceOf(b).forKey('k').pending;
      expect(await admin.lrange(pending, 0, -1)).toEqual(['a']);
      await waitFor(async () => (await admin.llen(pending)) === 2, { what: 'the timed-out push to land', timeoutMs: 5_000 });
    } finally {
      admin.disconnect();
      await server.stop();
    }
  });

  it('works under the ACL docs/redis.md documents, and a push refused a command writes nothing', async () => {
    const server = await startRedis();
    const admin = new Redis(server.port);
    try {
      // docs/redis.md's line, for the default prefix.
      const rules =
        '+@read +@write +@scripting +@connection +@transaction +@keyspace +@pubsub -@dangerous +time +info +client|setname'.split(' ');
      await admin.call('ACL', 'SETUSER', 'app', 'reset', 'on', '>pw', '~bull:*', 'resetchannels', '&bull:*', ...rules);
      const rec = new Recorder();
      const b = track(
        batchByKey({ name: uniqueName(), connection: `redis://app:pw@127.0.0.1:${server.port}`, eachIteration: rec.handler }),
      );
      const { ticket } = await b.performBatchLater(['1', '2'], { key: 'k', track: true });
      b.createWorker();
      await waitFor(() => rec.all.length === 2, { what: 'both ids, as the restricted user' });
      expect((await b.waitFor(ticket)).done).toBe(2);
      expect((await b.stats()).pending).toBe(0);
      expect(await b.deadLetters.count()).toBe(0);
      // The user loaded the scripts as functions (FUNCTION LOAD is @scripting, not @dangerous).
      expect(await admin.call('FUNCTION', 'LIST', 'LIBRARYNAME', scriptLibrary().name)).toHaveLength(1);
      await b.close();

      // Without +time the push script stops at its first command, before any write.
      await admin.call('ACL', 'SETUSER', 'app', '-time');
      const denied = track(
        batchByKey({ name: uniqueName(), connection: `redis://app:pw@127.0.0.1:${server.port}`, eachIteration: () => {} }),
      );
      const refused = await denied.performBatchLater(['1'], { key: 'k' }).catch((e: unknown) => e);
      expect(refused).toMatchObject({ message: expect.stringMatching(/can't run this command/) });
      // Redis's own refusal: the push's outcome is known.
      expect(refused).not.toBeInstanceOf(PushOutcomeUnknownError);
      // Only the batcher's config (its store, recorded before the first push) may be there.
      expect(await admin.keys(`bull:${denied.name}:*`)).toEqual([`bull:${denied.name}:bbk:config`]);
      await denied.close();
    } finally {
      await admin.quit();
      await server.stop();
    }
  });

  it('connects to an IPv6 host given in brackets (redis://[::1]:port)', async () => {
    const server = await startRedis(['--bind', '::1']);
    try {
      const rec = new Recorder();
      const b = track(batchByKey({ name: uniqueName(), connection: `redis://[::1]:${server.port}`, eachIteration: rec.handler }));
      expect(fromUrl(`redis://[::1]:${server.port}`)).toMatchObject({ host: '::1', port: server.port });
      await b.performBatchLater(['a'], { key: 'k' });
      b.createWorker();
      await waitFor(() => rec.all.length === 1, { what: 'the id, through the IPv6 connection' });
      await b.close();
    } finally {
      await server.stop();
    }
  });

  it.each([
    ['not a url', /not a valid Redis URL/],
    ['http://localhost:6379', /must be a redis:\/\/ or rediss:\/\/ URL, got http:\/\//],
    ['redis://localhost/x', /bad database number/],
  ])('refuses %s', (url, message) => {
    expect(() => batchByKey({ name: 'n', connection: url, eachIteration: () => {} })).toThrow(InvalidOptionError);
    expect(() => fromUrl(url)).toThrow(message);
  });

  it('close() is idempotent and a closed batcher refuses new pushes', async () => {
    const b = batchByKey({ name: uniqueName(), connection: redisUrl(), eachIteration: () => {} });
    await b.performBatchLater(['a'], { key: 'k' });
    // A processor made before the close: what runs need is built once, and must not outlive it.
    b.processor();
    await b.close();
    await b.close();
    await expect(b.performBatchLater(['b'], { key: 'k' })).rejects.toThrow(ClosedError);
    expect(() => b.createWorker()).toThrow(/is closed; create a new one/);
    expect(() => b.processor()).toThrow(ClosedError);
    // A Worker built by hand cannot be attached either: its recovery timer would throw from a timer.
    const worker = track(
      new Worker(uniqueName(), async () => {}, { connection: { ...parseUrl(redisUrl()), maxRetriesPerRequest: null }, autorun: false }),
    );
    expect(() => b.attach(worker)).toThrow(ClosedError);
  });

  it('a class-form batcher stays closed: the next static call throws ClosedError instead of opening new connections', async () => {
    class Job extends BatchByKey({ name: uniqueName(), connection: redisUrl() }) {
      eachIteration() {}
    }
    await Job.performBatchLater(['a'], { key: 'k' });
    await Job.close();
    await expect(Job.performBatchLater(['b'], { key: 'k' })).rejects.toThrow(ClosedError);
    await expect(Job.backlog('k')).rejects.toThrow(ClosedError);
    expect(() => Job.createWorker()).toThrow(ClosedError);
    await Job.close();
  });
});
