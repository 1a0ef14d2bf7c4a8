import { Redis } from 'ioredis';
import { describe, expect, it } from 'vitest';
import { batchByKey, InvalidOptionError, WaitTimeoutError, type Progress } from '../src';
import { startRedis } from '../tools/redis-server';
import { Gate } from './helpers/gate';
import { startWorkerProcess, stopProcess } from './helpers/processes';
import {
  keyspaceOf,
  onCluster,
  parseUrl,
  range,
  redisClient,
  redisUrl,
  testBatcher,
  testConnection,
  track,
  uniqueName,
  waitFor,
} from './helpers/redis';

/** Beyond the test timeout: a waitFor that resolves at all heard the change announced (it never read on a timer). */
const NO_POLL = { pollMs: 600_000, timeoutMs: 600_000 };

describe('waitFor hears ticket changes as they happen', () => {
  it('resolves as soon as the last slice is acked, with no read on a timer between', async () => {
    const gate = new Gate();
    const b = testBatcher({
      sliceSize: 5,
      eachIteration: async () => {
        await gate.opened;
      },
    });
    b.createWorker();
    const { ticket } = await b.performBatchLater(range(10), { key: 'k', track: true });
    const readings: Progress[] = [];
    const waiting = b.waitFor(ticket, { ...NO_POLL, onProgress: (p) => readings.push(p) });
    await waitFor(() => readings.length === 1, { what: 'the first reading' });
    gate.open();
    const final = await waiting;
    expect(final).toMatchObject({ total: 10, done: 10, failed: 0, pending: 0 });
    // The first reading, then one per change it heard, the last one being the final.
    expect(readings[0]!.done).toBe(0);
    expect(readings.at(-1)).toEqual(final);
    expect(readings.map((p) => p.done)).toEqual([...readings.map((p) => p.done)].sort((x, y) => x - y));
    // The channel is subscribed only while a ticket of its key has a waiter (one node's count: standalone).
    if (!onCluster()) {
      const channel = `${keyspaceOf(b).forKey('k').ticketPrefix}events`;
      const admin = redisClient() as Redis;
      await waitFor(async () => ((await admin.call('PUBSUB', 'NUMSUB', channel)) as [string, number])[1] === 0, {
        what: 'the channel unsubscribed',
      });
    }
  });

  it('hears an open ticket sealed, and a dead id counted as failed', async () => {
    const b = testBatcher({ attempts: 1, eachIteration: () => Promise.reject(new Error('boom')) });
    b.createWorker();
    const ticket = await b.openTicket('k');
    await b.performBatchLater(['1'], { ticket });
    const readings: Progress[] = [];
    const waiting = b.waitFor(ticket, { ...NO_POLL, onProgress: (p) => readings.push(p) });
    await waitFor(() => readings.some((p) => p.failed === 1), { what: 'the dead id counted' });
    expect(readings.at(-1)).toMatchObject({ sealed: false, pending: 0 });
    await b.sealTicket(ticket);
    expect(await waiting).toMatchObject({ total: 1, failed: 1, sealed: true, errors: [{ id: '1', message: 'boom' }] });
  });

  it('many waiters of one key and of other keys each resolve with their own ticket', async () => {
    const b = testBatcher({ sliceSize: 3, eachIteration: () => {} });
    const pushes = await Promise.all(
      range(6).map(async (i) => (await b.performBatchLater(range(4, `${i}-`), { key: `k${Number(i) % 2}`, track: true })).ticket),
    );
    const waits = pushes.map((ticket) => b.waitFor(ticket, NO_POLL));
    b.createWorker();
    for (const progress of await Promise.all(waits)) expect(progress).toMatchObject({ total: 4, done: 4, pending: 0 });
  });

  it('still times out with the last reading, and validates its options before reading', async () => {
    const b = testBatcher({ eachIteration: () => {} });
    const { ticket } = await b.performBatchLater(['1'], { key: 'k', track: true });
    const timedOut = await b.waitFor(ticket, { timeoutMs: 200, pollMs: 50 }).catch((e: unknown) => e);
    expect(timedOut).toBeInstanceOf(WaitTimeoutError);
    expect((timedOut as WaitTimeoutError).progress).toMatchObject({ total: 1, pending: 1 });
    // @ts-expect-error: not a function
    await expect(b.waitFor(ticket, { onProgress: 'log' })).rejects.toThrow(InvalidOptionError);
  });

  it.skipIf(onCluster())(
    'across processes: a producer hears a worker process, through a CLIENT KILL of its channel connection',
    async () => {
      const name = uniqueName();
      const b = track(batchByKey({ name, connection: testConnection() }));
      const { ticket } = await b.performBatchLater(range(40), { key: 'k', track: true });
      const readings: Progress[] = [];
      const waiting = b.waitFor(ticket, { ...NO_POLL, onProgress: (p) => readings.push(p) });
      await waitFor(() => readings.length === 1, { what: 'the first reading, once subscribed' });

      const admin = redisClient() as Redis;
      const subscribers = (): Promise<string> => admin.call('CLIENT', 'LIST', 'TYPE', 'pubsub') as Promise<string>;
      const before = await subscribers();
      expect(before.trim().split('\n').filter(Boolean).length).toBeGreaterThan(0);
      // Every pub/sub connection of this server: ours, and those of other files, which reconnect alike.
      await admin.call('CLIENT', 'KILL', 'TYPE', 'pubsub');

      const worker = await startWorkerProcess({ redisUrl: redisUrl(), name, options: { sliceSize: 4 }, sliceDelayMs: 20 });
      try {
        const final = await waiting;
        expect(final).toMatchObject({ total: 40, done: 40, pending: 0 });
        // Heard slice by slice, not only at the end: the subscription came back after the kill.
        expect(readings.filter((p) => p.done > 0 && p.done < 40).length).toBeGreaterThan(0);
      } finally {
        await stopProcess(worker);
      }
    },
  );

  it.skipIf(onCluster())('a user the ACL denies the channel still gets every write, and waitFor falls back to its timer', async () => {
    const server = await startRedis();
    const admin = new Redis(server.port);
    try {
      // docs/redis.md's line without the channel rules.
      const rules = '+@read +@write +@scripting +@connection +@transaction +@keyspace -@dangerous +time +info +client|setname'.split(' ');
      await admin.call('ACL', 'SETUSER', 'app', 'reset', 'on', '>pw', '~bull:*', 'resetchannels', ...rules);
      const b = track(batchByKey({ name: uniqueName(), connection: `redis://app:pw@127.0.0.1:${server.port}`, eachIteration: () => {} }));
      const { ticket } = await b.performBatchLater(range(3), { key: 'k', track: true });
      b.createWorker();
      expect(await b.waitFor(ticket, { pollMs: 50, timeoutMs: 20_000 })).toMatchObject({ total: 3, done: 3 });
      await b.close();
    } finally {
      await admin.quit();
      await server.stop();
    }
  });

  it.skipIf(onCluster())(
    'while Redis is away, waitFor rejects with WaitTimeoutError after its timeoutMs, begun before the outage or during it',
    async () => {
      const server = await startRedis();
      // No retry limit: a command waits for Redis for ever, so only waitFor's own deadline ends the wait.
      const b = batchByKey({
        name: uniqueName(),
        connection: { ...parseUrl(server.url), maxRetriesPerRequest: null },
        eachIteration: () => {},
      });
      try {
        const { ticket } = await b.performBatchLater(['1'], { key: 'k', track: true });
        let read = false;
        const before = b.waitFor(ticket, { timeoutMs: 3_000, pollMs: 100, onProgress: () => (read = true) }).catch((e: unknown) => e);
        await waitFor(() => read, { what: 'the first reading' });
        await server.stop();
        const during = b.waitFor(ticket, { timeoutMs: 2_000 }).catch((e: unknown) => e);
        const [first, second] = await Promise.all([before, during]);
        expect(first).toBeInstanceOf(WaitTimeoutError);
        expect(first).toMatchObject({ progress: { total: 1, pending: 1 } });
        expect(second).toBeInstanceOf(WaitTimeoutError);
        // Not one reading was answered.
        expect((second as WaitTimeoutError).progress).toBeUndefined();
      } finally {
        await b.close();
        await server.stop();
      }
    },
    30_000,
  );
});
