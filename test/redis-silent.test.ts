import { Redis } from 'ioredis';
import { describe, expect, it } from 'vitest';
import { batchByKey, ClosedError } from '../src';
import { startRedis, type LocalRedis } from '../tools/redis-server';
import { outOfMemory } from './fixtures/incident';
import { cli } from './helpers/cli';
import { parseUrl, range, uniqueName, waitFor } from './helpers/redis';

// Each test starts a redis-server of its own: stopping one (SIGSTOP) or filling its memory must not reach other files' tests.

/** Stops `server`'s process (SIGSTOP): the port still accepts connections, and nothing is answered. Returns its resume. */
async function silence(server: LocalRedis): Promise<() => void> {
  const admin = new Redis({ host: '127.0.0.1', port: server.port });
  const pid = Number(/process_id:(\d+)/.exec(await admin.info('server'))![1]);
  admin.disconnect();
  process.kill(pid, 'SIGSTOP');
  return () => process.kill(pid, 'SIGCONT');
}

/**
 * Pauses every client of `server` but one (`CLIENT PAUSE … ALL`, for longer than any bound under
 * test); returns its resume, sent on the connection that paused it.
 */
async function paused(server: LocalRedis): Promise<() => void> {
  const admin = new Redis({ host: '127.0.0.1', port: server.port });
  await admin.client('PAUSE', 60_000, 'ALL');
  return () => void admin.client('UNPAUSE').finally(() => admin.disconnect());
}

/** How long `work` took to settle, in ms; `NaN` (which fails any bound) when it had not after `giveUpMs`. */
async function timed(work: Promise<unknown>, giveUpMs: number): Promise<number> {
  const start = Date.now();
  let timer: NodeJS.Timeout | undefined;
  const settled = await Promise.race([
    work.then(
      () => true,
      () => true,
    ),
    new Promise<false>((resolve) => (timer = setTimeout(() => resolve(false), giveUpMs))),
  ]);
  clearTimeout(timer);
  return settled ? Date.now() - start : NaN;
}

describe('Redis up but silent, or refusing: every wait ends within its documented bound', () => {
  it.each(['SIGSTOP', 'CLIENT PAUSE'] as const)(
    'X.close() returns within CLOSE_QUIT_WAIT_MS while Redis does not answer (%s), its queue, channel and connection open',
    async (how) => {
      const server = await startRedis();
      let resume: (() => void) | undefined;
      const b = batchByKey({
        name: uniqueName(),
        connection: { ...parseUrl(server.url), maxRetriesPerRequest: null },
        pushTimeoutMs: 1_000,
      });
      try {
        const { ticket } = await b.performBatchLater(range(3), { key: 'k', track: true });
        // Opens the queues (stats reads their jobs) and the ticket channel (waitFor subscribes).
        await b.stats();
        let read = 0;
        const waiting = b.waitFor(ticket, { onProgress: () => void read++ }).catch((e: unknown) => e);
        await waitFor(() => read > 0, { what: 'waitFor to read once' });
        resume = how === 'SIGSTOP' ? await silence(server) : await paused(server);
        // Before the fix the QUITs waited for ever.
        const took = await timed(b.close(), 15_000);
        expect(took).toBeLessThan(5_000);
        expect(await waiting).toBeInstanceOf(ClosedError);
      } finally {
        resume?.();
        await b.close();
        await server.stop();
      }
    },
    30_000,
  );

  it('the CLI exits 1 within seconds, saying Redis did not answer, when Redis accepts the connection and answers nothing', async () => {
    const server = await startRedis();
    const resume = await silence(server);
    try {
      const run = cli(['--redis', server.url, '--name', 'silent', 'stats']);
      // Before the fix it waited for ever.
      expect(await timed(run, 25_000)).toBeLessThan(8_000);
      const { code, stdout, stderr } = await run;
      expect({ code, stdout }).toEqual({ code: 1, stdout: '' });
      expect(stderr).toMatch(/^batch-by-key: Redis at redis:\/\/127\.0\.0\.1:\d+ did not answer within 5\.0 s \(Command timed out\)\n$/);
    } finally {
      resume();
      await server.stop();
    }
  }, 40_000);

  it('worker.close() while Redis answers but refuses every write (OOM) returns without the wait meant for Redis away', async () => {
    const server = await startRedis();
    const admin = new Redis({ host: '127.0.0.1', port: server.port });
    let end: (() => Promise<void>) | undefined;
    let started = 0;
    const b = batchByKey({
      name: uniqueName(),
      connection: { ...parseUrl(server.url), maxRetriesPerRequest: null },
      sliceSize: 5,
      shutdownTimeoutMs: 500,
      eachIteration: async () => {
        started++;
        await new Promise((resolve) => setTimeout(resolve, 20));
      },
    });
    try {
      for (const key of ['a', 'b', 'c']) await b.performBatchLater(range(1_000, key), { key });
      const worker = b.createWorker({ concurrency: 3 });
      await waitFor(() => started >= 6, { what: 'runs under way' });
      end = await outOfMemory(admin);
      // shutdownTimeoutMs + CLOSE_REDIS_WAIT_MS (10.5 s) before the fix: the runs' releases, refused, kept it waiting.
      const took = await timed(worker.close(), 15_000);
      expect(took).toBeLessThan(4_500);
      // Redis answered throughout.
      expect(await admin.ping()).toBe('PONG');
    } finally {
      await end?.();
      admin.disconnect();
      await b.close();
      await server.stop();
    }
  }, 40_000);
});
