import { mkdirSync } from 'node:fs';
import { createBullBoard } from '@bull-board/api';
import { BullMQAdapter } from '@bull-board/api/bullMQAdapter';
import { ExpressAdapter } from '@bull-board/express';
import express from 'express';
import { chromium, type Browser } from 'playwright-core';
import type { Queue } from 'bullmq';
import { afterAll, describe, expect, it } from 'vitest';
import { batchByKey, bullBoardAdapters, ClosedError, dashboard, InvalidOptionError, JOB_NAME, type Batcher, type KeyJobView } from '../src';
import { formatMs } from '../src/ops/html';
import { serveLocally } from './helpers/http';
import { queueOf, testBatcher, testConnection, track, uniqueName, waitFor } from './helpers/redis';

/** A producer: its key jobs wait, so the board has them to show. */
const producer = (options: { shards?: number } = {}): Batcher =>
  track(batchByKey({ name: uniqueName('board'), connection: testConnection(), ...options }));

const WAITING = ['waiting', 'prioritized', 'delayed', 'active'];

/** The name and data of each job one adapter lists. */
async function shown(adapter: BullMQAdapter): Promise<{ name: string; data: Record<string, unknown> }[]> {
  const jobs = await adapter.getJobs(WAITING as never[]);
  return jobs.map((job) => ({ name: job.name, data: job.data as Record<string, unknown> }));
}

/** The data a key's job shows. */
const keyJob = (jobs: { name: string; data: Record<string, unknown> }[], key: string) =>
  jobs.find((j) => j.name === JOB_NAME && j.data.key === key)?.data;

/** Adds a job of another name to the batcher's queue, as an application sharing it would. */
const addForeign = (b: Batcher, data: Record<string, unknown>) => (queueOf(b) as unknown as Queue).add('send-email', data);

describe('bullBoardAdapters', () => {
  it("shows a key job's key, pending count and lag, read when the board reads the page, and leaves other jobs as they are", async () => {
    const b = producer();
    await b.performBatchLater(['1', '2', '3'], { key: 'acct-1' });
    await b.performBatchLater(['x'], { key: 'acct-2' });
    const foreign = await addForeign(b, { key: 'acct-1', to: 'a@example.com' });

    const adapters = bullBoardAdapters(b, BullMQAdapter, { readOnlyMode: true });
    expect(adapters).toHaveLength(1);
    const [adapter] = adapters as [BullMQAdapter];
    expect(adapter).toBeInstanceOf(BullMQAdapter);
    expect(adapter.getName()).toBe(b.name);
    expect(adapter.readOnlyMode).toBe(true);

    // Lag grows while nothing runs: read until the oldest id is a few ms old by the Redis clock.
    const jobs = await waitFor(
      async () => {
        const list = await shown(adapter);
        return ((keyJob(list, 'acct-1')?.oldestPendingAgeMs as number) ?? 0) > 0 ? list : undefined;
      },
      { what: 'acct-1 to lag' },
    );
    const view = keyJob(jobs, 'acct-1') as unknown as KeyJobView;
    expect(view).toEqual({
      key: 'acct-1',
      pending: 3,
      lag: formatMs(view.oldestPendingAgeMs),
      level: 'light',
      inFlight: 0,
      retrying: 0,
      oldestPendingAgeMs: expect.any(Number) as number,
      readAt: expect.stringMatching(/^\d{4}-\d\d-\d\dT/) as string,
    });
    expect(Object.keys(view).slice(0, 3)).toEqual(['key', 'pending', 'lag']); // what the board's data view shows first
    expect(keyJob(jobs, 'acct-2')).toMatchObject({ key: 'acct-2', pending: 1 });
    expect(jobs.find((j) => j.name === 'send-email')!.data).toEqual({ key: 'acct-1', to: 'a@example.com' });
    expect(jobs.filter((j) => j.name === JOB_NAME)).toHaveLength(2);

    // A job's own page reads it alone, and the views are read afresh each time.
    await b.performBatchLater(['4'], { key: 'acct-1' });
    const id = (await adapter.getJobs(WAITING as never[])).find((j) => j.name === JOB_NAME && (j.data as KeyJobView).key === 'acct-1')!.id!;
    expect((await adapter.getJob(id))!.data).toMatchObject({ key: 'acct-1', pending: 4, inFlight: 0 });
    expect((await adapter.getJob(foreign.id!))!.data).toEqual({ key: 'acct-1', to: 'a@example.com' });
    expect(await adapter.getJob('no-such-job')).toBeUndefined();
  });

  it("labels a key job's fair-scheduling level, which bull-board shows as its BullMQ priority", async () => {
    const b = producer();
    await b.performBatchLater(['1'], { key: 'small' });
    await b.performBatchLater(
      Array.from({ length: 150 }, (_, i) => i),
      { key: 'big' },
    );
    const [adapter] = bullBoardAdapters(b, BullMQAdapter) as [BullMQAdapter];
    const jobs = await adapter.getJobs(WAITING as never[]);
    const big = jobs.find((j) => (j.data as KeyJobView).key === 'big')!;
    // A first push bigger than a slice (100): BullMQ priority 1, which reads as "top priority" to a BullMQ user.
    expect(big.opts.priority).toBe(1);
    expect(big.data).toMatchObject({ key: 'big', pending: 150, level: 'heavy' });
    expect(jobs.find((j) => (j.data as KeyJobView).key === 'small')!.data).toMatchObject({ level: 'light' });
  });

  it('shows a key being worked on as in flight, and a drained key as zeros', async () => {
    let release!: () => void;
    const released = new Promise<void>((resolve) => (release = resolve));
    const b = testBatcher({ sliceSize: 2, eachIteration: () => released });
    await b.performBatchLater(['1', '2', '3'], { key: 'busy' });
    const [adapter] = bullBoardAdapters(b, BullMQAdapter) as [BullMQAdapter];
    b.createWorker();
    const busy = await waitFor(async () => (await shown(adapter)).find((j) => j.data.inFlight === 2), { what: 'the slice in flight' });
    expect(busy.data).toMatchObject({ key: 'busy', pending: 1, inFlight: 2, retrying: 0 });
    release();
    await waitFor(async () => (await b.backlog('busy')).pending + (await b.backlog('busy')).inFlight === 0, { what: 'drained' });
  });

  it('gives one adapter per shard, each named apart, each showing the key jobs of its queue', async () => {
    const b = producer({ shards: 3 });
    const keys = Array.from({ length: 12 }, (_, i) => `acct-${i}`);
    for (const key of keys) await b.performBatchLater(['1', '2'], { key });
    const adapters = bullBoardAdapters(b, BullMQAdapter);
    expect(adapters.map((a) => a.getName())).toEqual([0, 1, 2].map((i) => `${b.name}:shard-${i}`));
    const perShard = await Promise.all(adapters.map(shown));
    expect(perShard.every((jobs) => jobs.length > 0)).toBe(true); // 12 keys over 3 shards
    const all = perShard.flat();
    expect(all.map((j) => j.data.key).sort()).toEqual([...keys].sort());
    expect(all.every((j) => j.data.pending === 2)).toBe(true);
  });

  it('refuses what is not a batcher, an adapter class or an options object, before touching Redis; a closed batcher is a ClosedError', async () => {
    const b = producer();
    expect(() => bullBoardAdapters({ name: 'x' } as unknown as Batcher, BullMQAdapter)).toThrow(InvalidOptionError);
    expect(() => bullBoardAdapters(null as unknown as Batcher, BullMQAdapter)).toThrow(/a batcher made by batchByKey/);
    expect(() => bullBoardAdapters(b, {} as typeof BullMQAdapter)).toThrow(/BullMQAdapter class/);
    expect(() => bullBoardAdapters(b, BullMQAdapter, null as unknown as undefined)).toThrow(InvalidOptionError);
    await b.close();
    expect(() => bullBoardAdapters(b, BullMQAdapter)).toThrow(ClosedError);
  });
});

let browser: Browser | undefined;
afterAll(async () => {
  await browser?.close();
});

describe('bull-board in a browser, beside the dashboard', () => {
  it("shows the key job with its key and pending count on the queue's page", async () => {
    const b = producer();
    await b.performBatchLater(['1', '2', '3', '4', '5'], { key: 'acct-board' });
    await addForeign(b, { to: 'a@example.com' });

    const app = express();
    const board = new ExpressAdapter();
    board.setBasePath('/admin/board');
    // A sharded batcher beside it: its queues are named apart (`:shard-<index>`), and bull-board routes by name.
    const sharded = producer({ shards: 2 });
    await sharded.performBatchLater(['1', '2'], { key: 'acct-sharded' });
    const shardAdapters = bullBoardAdapters(sharded, BullMQAdapter, { readOnlyMode: true });
    const shardName = await waitFor(async () => {
      for (const adapter of shardAdapters) if (keyJob(await shown(adapter), 'acct-sharded')) return adapter.getName();
    });
    createBullBoard({
      queues: [...bullBoardAdapters(b, BullMQAdapter, { readOnlyMode: true }), ...shardAdapters],
      serverAdapter: board,
    });
    app.use('/admin/board', board.getRouter() as express.Router);
    app.use('/admin/queues', dashboard({ batchers: [b] }));
    const url = await serveLocally(app);

    browser ??= await chromium.launch({ executablePath: '/usr/bin/chromium', headless: true, args: ['--no-sandbox'] });
    const page = await browser.newPage();
    try {
      await page.goto(`${url}/admin/board/queue/${encodeURIComponent(b.name)}?status=waiting`);
      const card = page.locator('main').getByText('acct-board').first();
      await card.waitFor({ timeout: 20_000 });
      const text = await page.locator('main').innerText();
      // The card of the key's job, its data as the board prints it (`jobData:{ key:"…", pending:5, lag:"1.2 s", … }`).
      expect(text).toMatch(/batch-by-key[^#]*jobData:\{\s*key:"acct-board",\s*pending:5,\s*lag:"[\d.]+ (ms|s)",/);
      expect(text).toContain('a@example.com'); // the other job, as it is
      mkdirSync('test-artifacts', { recursive: true });
      await page.screenshot({ path: 'test-artifacts/bull-board.png', fullPage: true });

      await page.goto(`${url}/admin/board/queue/${encodeURIComponent(shardName)}?status=waiting`);
      await page.locator('main').getByText('acct-sharded').first().waitFor({ timeout: 20_000 });
      expect(await page.locator('main').innerText()).toMatch(/jobData:\{\s*key:"acct-sharded",\s*pending:2,/);

      // Our dashboard, mounted beside it, reads the same key.
      await page.goto(`${url}/admin/queues/`);
      expect(await page.locator(`section[data-batcher="${b.name}"]`).innerText()).toMatch(/acct-board\t5\t0\t0\t/);
    } finally {
      await page.close();
    }
  });
});
