import type { AddressInfo } from 'node:net';
import { beforeEach, describe, expect, it, vi } from 'vitest';
import type { Batcher } from '../src';
import { redisUrl, track, waitFor } from './helpers/redis';

type ErrorBody = { error: { code: string; message: string } };

// Each test imports the examples afresh: the module-level SegmentRefresher is closed after a test.
beforeEach(() => {
  vi.resetModules();
  process.env.REDIS_URL = redisUrl();
});

describe('examples/quickstart.mts', () => {
  it("is the README's quick start, and runs as it is: the ids of the key, then the ticket's progress", async () => {
    const { fork } = await import('node:child_process');
    const { readFileSync } = await import('node:fs');
    const path = await import('node:path');
    const file = path.join(__dirname, '..', 'examples', 'quickstart.mts');
    expect(readFileSync(path.join(__dirname, '..', 'README.md'), 'utf8')).toContain(readFileSync(file, 'utf8'));

    const child = fork(file, [], { execArgv: ['--import', 'tsx'], env: { ...process.env, REDIS_URL: redisUrl() }, stdio: 'pipe' });
    let stdout = '';
    child.stdout!.on('data', (d: Buffer) => (stdout += d.toString()));
    const code = await new Promise<number | null>((resolve) => child.once('exit', resolve));
    expect(code).toBe(0);
    expect(stdout).toBe(
      'acct-42: refreshing s1, s2, s3\n{\n  total: 3,\n  done: 3,\n  failed: 0,\n  dropped: 0,\n  pending: 0,\n  errors: [],\n  sealed: true\n}\n',
    );
  });
});

describe('examples/server.ts', () => {
  /** The example's app on a free port, and a POST of a body for an account. */
  async function startServer() {
    const { createApp } = await import('../examples/server');
    const { SegmentRefresher } = await import('../examples/segment-refresher');
    track(SegmentRefresher);
    const server = createApp().listen(0);
    track({ close: () => new Promise<void>((resolve) => server.close(() => resolve())) });
    await new Promise((resolve) => server.once('listening', resolve));
    const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    const post = (body: unknown, account?: string) =>
      fetch(`${base}/segments/refresh`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', ...(account ? { 'x-account-id': account } : {}) },
        body: JSON.stringify(body),
      });
    return { SegmentRefresher, post };
  }

  it('pushes for the account of the request header, and answers bad input with the error code', async () => {
    const { SegmentRefresher, post } = await startServer();

    const ok = await post({ ids: [1, 2, 3] }, 'acct-42');
    expect(ok.status).toBe(202);
    expect(await ok.json()).toEqual({ key: 'acct-42', pushed: 3 });
    expect(await SegmentRefresher.backlog('acct-42')).toEqual({ pending: 3, inFlight: 0, retrying: 0 });

    const noAccount = await post({ ids: [1] });
    expect(noAccount.status).toBe(400);
    expect(((await noAccount.json()) as ErrorBody).error.code).toBe('ERR_MISSING_KEY');

    const badIds = await post({ ids: 'nope' }, 'acct-42');
    expect(badIds.status).toBe(400);
    expect(((await badIds.json()) as ErrorBody).error.code).toBe('ERR_INVALID_IDS');

    SegmentRefresher.createWorker();
    await waitFor(async () => (await SegmentRefresher.backlog('acct-42')).pending === 0);
  });

  it('answers 503 with the error code once the batcher is closed (the process is shutting down)', async () => {
    const { SegmentRefresher, post } = await startServer();
    await SegmentRefresher.close();
    const closed = await post({ ids: [1] }, 'acct-42');
    expect(closed.status).toBe(503);
    expect(((await closed.json()) as ErrorBody).error.code).toBe('ERR_CLOSED');
  });
});

describe('examples/http-errors.ts', () => {
  it('bad input is a 400, a full backlog a 429, a sealed ticket a 409, an unknown one a 404, Redis not answering, a push of unknown outcome or a closed batcher a 503, and every other code a 500', async () => {
    const { httpStatusOf } = await import('../examples/http-errors');
    const errors = await import('../src');
    expect(httpStatusOf(new errors.InvalidIdsError('x'))).toBe(400);
    expect(httpStatusOf(new errors.InvalidKeyError('x'))).toBe(400);
    expect(httpStatusOf(new errors.MissingKeyError('x'))).toBe(400);
    expect(httpStatusOf(new errors.PushTimeoutError('x'))).toBe(503);
    expect(httpStatusOf(new errors.PushOutcomeUnknownError('x'))).toBe(503);
    expect(httpStatusOf(new errors.ClosedError('x'))).toBe(503);
    // A key's backlog full is the 429 the docs answer (Backpressure, api.md); a ticket the client
    // named is its own mistake: sealed, a conflict; expired or never opened, not found. All three were 500.
    expect(httpStatusOf(new errors.KeyBacklogFullError('x', 'k', 10, 10))).toBe(429);
    expect(httpStatusOf(new errors.TicketSealedError('x'))).toBe(409);
    expect(httpStatusOf(new errors.UnknownTicketError('x'))).toBe(404);
    expect(httpStatusOf(new errors.InvalidOptionError('x'))).toBe(500);
    expect(httpStatusOf(new errors.StoreMismatchError('x'))).toBe(500);
  });
});

describe('examples/worker.ts', () => {
  it('on SIGTERM finishes the running slice, releases the key and exits 0; another worker resumes', async () => {
    const { fork } = await import('node:child_process');
    const path = await import('node:path');
    const { SegmentRefresher } = await import('../examples/segment-refresher');
    track(SegmentRefresher);
    await SegmentRefresher.performBatchLater(
      Array.from({ length: 400 }, (_, i) => i),
      { key: 'sigterm' },
    );

    const child = fork(path.join(__dirname, '..', 'examples', 'worker.ts'), [], {
      execArgv: ['--import', 'tsx'],
      env: { ...process.env, REDIS_URL: redisUrl() },
      stdio: 'pipe',
    });
    const exited = new Promise<number | null>((resolve) => child.once('exit', resolve));
    await waitFor(async () => (await SegmentRefresher.backlog('sigterm')).pending < 390, { what: 'the worker to make progress' });
    child.kill('SIGTERM');
    expect(await exited).toBe(0);

    const left = await SegmentRefresher.backlog('sigterm');
    expect(left.inFlight).toBe(0);
    expect(left.pending).toBeGreaterThan(0);
    SegmentRefresher.createWorker({ concurrency: 1 });
    await waitFor(async () => (await SegmentRefresher.backlog('sigterm')).pending === 0, { timeoutMs: 30_000 });
  });
});

describe('examples/bull-board.ts', () => {
  it("serves bull-board, where the key's job shows its key, pending count and lag, beside the dashboard", async () => {
    const { createBoardApp } = await import('../examples/bull-board');
    const { SegmentRefresher } = await import('../examples/segment-refresher');
    track(SegmentRefresher);
    const key = `board-${Date.now()}`;
    await SegmentRefresher.performBatchLater([1, 2, 3], { key });
    const server = createBoardApp().listen(0);
    track({ close: () => new Promise<void>((resolve) => server.close(() => resolve())) });
    await new Promise((resolve) => server.once('listening', resolve));
    const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;

    // bull-board's own API, as its page reads it: the queue's waiting jobs.
    const reply = await fetch(`${base}/admin/queues/api/queues?activeQueue=segment-refresher&status=waiting&page=1&jobsPerPage=100`);
    expect(reply.status).toBe(200);
    const { queues } = (await reply.json()) as {
      queues: { name: string; readOnlyMode: boolean; jobs: { name: string; data: unknown }[] }[];
    };
    const queue = queues.find((q) => q.name === 'segment-refresher')!;
    expect(queue.readOnlyMode).toBe(true);
    expect(queue.jobs.find((job) => (job.data as { key?: string }).key === key)?.data).toMatchObject({ key, pending: 3, inFlight: 0 });

    const page = await fetch(`${base}/admin/batch-by-key/`);
    expect(page.status).toBe(200);
    expect(await page.text()).toContain(key);
  });
});

describe('examples/bulk-import.ts', () => {
  it('reports exact progress, retries the flaky slice, and dead-letters only the invalid rows', async () => {
    const { main, Importer } = await import('../examples/bulk-import');
    track(Importer);
    const log = vi.spyOn(console, 'log').mockImplementation(() => {});
    const warn = vi.spyOn(console, 'warn').mockImplementation(() => {});
    try {
      await main(2000);
      // 13, 113, …, 1913: 20 invalid rows.
      // The first rejected is 13, or 113 when the flaky first slice is still backing off.
      expect(log.mock.calls[0]![0]).toMatch(
        /^imported 1980 of 2000 rows; 20 rejected, e\.g\. \{"id":"(1?13)","message":"row \1 failed validation"\}$/,
      );
      // Each row dead with its own error (ctx.fail).
      expect(log.mock.calls[1]![1]).toMatch(
        /^(\d*13): row \1 failed validation, (\d*13): row \2 failed validation, (\d*13): row \3 failed validation$/,
      );
      expect(warn.mock.calls.some(([m]) => String(m).includes('search index timed out'))).toBe(true);
    } finally {
      log.mockRestore();
      warn.mockRestore();
    }
  });
});

describe('examples/crm-sync.ts', () => {
  it('delivers every record of every account in order, within the per-account and the token limits', async () => {
    const { main, CrmSync } = await import('../examples/crm-sync');
    track(CrmSync);
    const log = vi.spyOn(console, 'log').mockImplementation(() => {});
    try {
      const received = await main(30);
      for (const account of ['acct-1', 'acct-2', 'acct-3']) {
        expect(received.get(account)).toEqual(Array.from({ length: 30 }, (_, i) => `${account}-r${i}`));
      }
      // A 429 (request times jitter against the CRM's own window) only puts a slice back, in order.
      expect(log.mock.calls[0]![0]).toMatch(
        /^synced 90 records in \d+\.\d s at 20\/s per account and 50\/s for the token; the CRM throttled \d+ requests$/,
      );
    } finally {
      log.mockRestore();
    }
  });
});

describe('examples/event-sink.ts', () => {
  it("inserts a busy account's single-event pushes in batches of at least 50, and a quiet one's after its wait", async () => {
    const { main, EventSink } = await import('../examples/event-sink');
    track(EventSink);
    const log = vi.spyOn(console, 'log').mockImplementation(() => {});
    try {
      const pushedAt = Date.now();
      const inserts = await main();
      const busy = inserts.filter((s) => s.account === 'busy');
      expect(busy.flatMap((s) => s.events).sort()).toEqual(Array.from({ length: 120 }, (_, i) => `busy-e${i}`).sort());
      // Every insert but the busy account's last (its tail, which waited) held at least minSliceSize events.
      for (const insert of busy.slice(0, -1)) expect(insert.events.length).toBeGreaterThanOrEqual(50);
      const quiet = inserts.filter((s) => s.account === 'quiet');
      expect(quiet.map((s) => s.events)).toEqual([['quiet-e0', 'quiet-e1', 'quiet-e2']]);
      expect(quiet[0]!.at - pushedAt).toBeGreaterThanOrEqual(495);
      expect(log.mock.calls.map((c): unknown => c[0])).toEqual([
        expect.stringMatching(/^busy: 120 events in \d+ insert\(s\) of [\d, ]+, the last \d+\.\d s after the first push$/),
        expect.stringMatching(/^quiet: 3 events in 1 insert\(s\) of 3, the last \d+\.\d s after the first push$/),
      ]);
    } finally {
      log.mockRestore();
    }
  });
});

describe('examples/import-with-callback.ts', () => {
  it('reads pages into an open ticket and gets one callback after sealing, with the rejected rows counted', async () => {
    const { main, Import } = await import('../examples/import-with-callback');
    track(Import);
    const log = vi.spyOn(console, 'log').mockImplementation(() => {});
    try {
      const outcome = await main(3);
      // Rows 0, 97, 194 and 291 of 300 have a negative quantity.
      expect(outcome).toMatchObject({ total: 300, done: 296, failed: 4, pending: 0, success: false, sealed: true });
      expect(log.mock.calls.map((c): unknown => c[0])).toEqual(['import finished with errors: 296 rows imported, 4 rejected']);
    } finally {
      log.mockRestore();
    }
  });
});

describe('examples/nestjs.ts', () => {
  it('the controller pushes per account, the processor refreshes through its service, and a bad id is dead-lettered', async () => {
    const { bootstrap, SegmentsService, SEGMENTS } = await import('../examples/nestjs');
    const { getBatcherToken } = await import('../src/nestjs');
    const app = await bootstrap({ port: 0, logger: false });
    track(app);
    const base = await app.getUrl();
    const post = (account: string, body: unknown) =>
      fetch(`${base}/accounts/${account}/segments/refresh`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify(body),
      });

    const ok = await post('acct-42', { ids: [1, 2, 3] });
    expect(ok.status).toBe(202);
    expect(await ok.json()).toEqual({ key: 'acct-42', pushed: 3 });
    await post('acct-42', { ids: ['3', '4', 'summer-sale'] });
    const bad = await post('acct-42', { ids: 'nope' });
    expect(bad.status).toBe(400);
    expect(((await bad.json()) as ErrorBody).error.code).toBe('ERR_INVALID_IDS');

    const refreshed = app.get(SegmentsService).refreshed;
    const batcher = app.get<Batcher>(getBatcherToken(SEGMENTS));
    await waitFor(async () => refreshed.get('acct-42')?.size === 4 && (await batcher.deadLetters.count()) === 1, { what: 'the refreshes' });
    expect([...refreshed.get('acct-42')!].sort()).toEqual(['1', '2', '3', '4']);
    expect((await batcher.deadLetters.list()).letters.map((l) => [l.key, l.id])).toEqual([['acct-42', 'summer-sale']]);
    await app.close();
  });
});

describe('examples/demo.ts', () => {
  it('takes an empty REDIS_URL for none: starts a throwaway redis-server, and stops it even when the demo fails', async () => {
    const { withDemoRedis } = await import('../examples/demo');
    const { Redis } = await import('ioredis');
    let used = '';
    const failed = await withDemoRedis(
      async (url) => {
        used = url;
        // Before the fix the empty REDIS_URL was passed on as the URL, which the batcher refuses.
        const client = new Redis(url, { maxRetriesPerRequest: 0, retryStrategy: () => null });
        try {
          expect(await client.ping()).toBe('PONG');
        } finally {
          client.disconnect();
        }
        throw new Error('the demo failed');
      },
      { REDIS_URL: '' },
    ).catch((err: unknown) => err);
    expect(failed).toMatchObject({ message: 'the demo failed' });
    // Stopped in its finally: nothing listens there any more.
    const { connect } = await import('node:net');
    const { port } = new URL(used);
    const refused = await new Promise<string | undefined>((resolve) => {
      const socket = connect(Number(port), '127.0.0.1');
      socket.once('connect', () => {
        socket.destroy();
        resolve(undefined);
      });
      socket.once('error', (err: NodeJS.ErrnoException) => resolve(err.code));
    });
    expect(refused).toBe('ECONNREFUSED');
  });
});
