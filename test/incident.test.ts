import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Batcher } from '../src';
import { redisFailureKind } from '../src/core/redis-errors';
import { Keyspace } from '../src/storage/keys';
import { startRedis, type LocalRedis } from '../tools/redis-server';
import { INCIDENT_IDS, INCIDENT_KEYS, incidentBatcher, outOfMemory } from './fixtures/incident';
import { track, waitFor } from './helpers/redis';
import { sleep } from './helpers/time';

// A Redis of its own: these tests set its maxmemory and keep it busy with a script.
let server: LocalRedis;
let admin: Redis;
beforeAll(async () => {
  server = await startRedis();
  // Not tracked: tracked resources are closed after each test.
  admin = new Redis({ host: '127.0.0.1', port: server.port });
});
afterAll(async () => {
  admin?.disconnect();
  await server?.stop();
});

/** Well inside the lock's TTL (INCIDENT_LOCK_TTL_MS), and many sweeps long. */
const RECOVERED_WITHIN_MS = 15_000;
const everyId = INCIDENT_IDS;

interface Line {
  at: number;
  level: 'warn' | 'error';
  message: string;
  meta: Record<string, unknown>;
}

/** The incident load on this file's Redis, with the ids its handler saw and every line its logger got. */
async function loaded(name: string, options: { lockTtlMs?: number } = {}): Promise<{ b: Batcher; seen: Set<string>; lines: Line[] }> {
  const seen = new Set<string>();
  const lines: Line[] = [];
  const line =
    (level: Line['level']) =>
    (message: string, meta: Record<string, unknown> = {}) =>
      void lines.push({ at: Date.now(), level, message, meta });
  const b = track(await incidentBatcher(server.port, name, { warn: line('warn'), error: line('error') }, (id) => seen.add(id), options));
  return { b, seen, lines };
}

/** Redis out of memory for `ms`, then as before. */
async function outOfMemoryFor(ms: number): Promise<void> {
  const end = await outOfMemory(admin);
  try {
    await sleep(ms);
  } finally {
    await end();
  }
}

/** How many commands Redis has refused for want of memory (INFO errorstats). */
const refusals = async (): Promise<number> => Number(/errorstat_OOM:count=(\d+)/.exec(await admin.info('errorstats'))?.[1] ?? 0);
const lockNames = (name: string): string[] => INCIDENT_KEYS.map((k) => new Keyspace('bull', name).forKey(k).lock);
const sawRefusal = (lines: Line[], code: string): boolean => lines.some((l) => redisFailureKind(l.meta.err) === code);

describe('a Redis incident mid-run: no key waits for its lock TTL afterwards', () => {
  it('out of memory for 1.8 s: every id of every key runs soon after, not lockTtlMs later', async () => {
    const { b, seen, lines } = await loaded('oom');
    b.createWorker({ concurrency: 4 });
    await waitFor(() => seen.size >= 100, { intervalMs: 5, what: 'runs under way' });
    await outOfMemoryFor(1_800);
    // Before the fix, runs whose release Redis refused left their locks, and 230-260 ids of 4
    // keys ran only when those expired.
    await waitFor(() => seen.size === everyId, { timeoutMs: RECOVERED_WITHIN_MS, what: `all ${everyId} ids` });
    expect(sawRefusal(lines, 'OOM')).toBe(true);
  });

  it('worker.close() during the outage leaves no lock once Redis answers, and the next worker runs every id', async () => {
    const name = 'oom-close';
    const { b, seen, lines } = await loaded(name);
    const worker = b.createWorker({ concurrency: 4 });
    await waitFor(() => seen.size >= 100, { intervalMs: 5, what: 'runs under way' });
    let closing: Promise<void> | undefined;
    await Promise.all([outOfMemoryFor(1_800), sleep(100).then(() => (closing = worker.close()))]);
    await closing;
    expect(sawRefusal(lines, 'OOM')).toBe(true);
    // The close waited for its runs' releases, which Redis took once it answered.
    expect(await admin.exists(...lockNames(name))).toBe(0);
    b.createWorker({ concurrency: 4 });
    await waitFor(() => seen.size === everyId, { timeoutMs: RECOVERED_WITHIN_MS, what: `all ${everyId} ids` });
  });

  it('a busy script for 1.5 s, then SCRIPT KILL: every id of every key runs soon after', async () => {
    await busyFor(1_500, 'busy');
  });

  it("a busy script longer than lockTtlMs: the runs hand their jobs back once Redis answers, not at BullMQ's stalled check", async () => {
    // Their releases give up as their locks expire; their requeues, refused too, left the jobs
    // active with no run behind them until BullMQ's stalled check, 30-40 s after the kill.
    await busyFor(3_500, 'busy-long', { lockTtlMs: 2_000 });
  });

  async function busyFor(ms: number, name: string, options: { lockTtlMs?: number } = {}): Promise<void> {
    const { b, seen, lines } = await loaded(name, options);
    // Redis answers BUSY to others once a script has run this long (5 s by default).
    await admin.config('SET', 'busy-reply-threshold', '100');
    const busy = track(new Redis({ host: '127.0.0.1', port: server.port }));
    // Connected before the script runs: a connection's ready check (INFO) would get BUSY.
    const killer = track(new Redis({ host: '127.0.0.1', port: server.port }));
    await Promise.all([busy.ping(), killer.ping()]);
    try {
      b.createWorker({ concurrency: 4 });
      await waitFor(() => seen.size >= 100, { intervalMs: 5, what: 'runs under way' });
      // A read-only script that spins (SCRIPT KILL ends only those), from a connection of its own.
      const spinning = busy.eval('while true do redis.call("TIME") end', 0).catch((err: Error) => err);
      await sleep(ms);
      await killer.script('KILL');
      expect(String(await spinning)).toMatch(/killed/i);
      await waitFor(() => seen.size === everyId, { timeoutMs: RECOVERED_WITHIN_MS, what: `all ${everyId} ids` });
      expect(sawRefusal(lines, 'BUSY')).toBe(true);
    } finally {
      await admin.config('SET', 'busy-reply-threshold', '5000');
    }
  }

  it('logs a bounded number of lines during a 2 s outage (one per kind of failure per interval, with a count), and its retries back off', async () => {
    const { b, seen, lines } = await loaded('oom-log');
    b.createWorker({ concurrency: 4 });
    await waitFor(() => seen.size >= 100, { intervalMs: 5, what: 'runs under way' });
    const refusedBefore = await refusals();
    const from = Date.now();
    await outOfMemoryFor(2_000);
    const to = Date.now();
    const refused = (await refusals()) - refusedBefore;
    const during = lines.filter((l) => l.at >= from && l.at <= to);
    const kinds = new Map<string, number>();
    for (const l of during) {
      const kind = `${l.level} ${l.message} ${redisFailureKind(l.meta.err)}`;
      kinds.set(kind, (kinds.get(kind) ?? 0) + 1);
    }
    expect(sawRefusal(lines, 'OOM')).toBe(true);
    // Before the fix: 209 lines here (191 of them BullMQ's refused fetches); 2,700-4,000 in issue 38. One interval (LOG_REPEAT_INTERVAL_MS, 1 s) per kind: the
    // first line, then one with the count at each interval's end.
    expect(during.length).toBeLessThanOrEqual(30);
    for (const [kind, count] of kinds) expect(count, kind).toBeLessThanOrEqual(3);
    // And retries back off (50 ms doubling to 1 s): a few per run and sweep.
    expect(refused).toBeLessThanOrEqual(100);
    await waitFor(() => seen.size === everyId, { timeoutMs: RECOVERED_WITHIN_MS, what: `all ${everyId} ids` });
  });

  it('a worker whose fetches Redis refuses backs off instead of fetching again at once', async () => {
    const { b, seen } = await loaded('oom-fetch');
    // Jobs wait and every slot is free: each slot fetches, and Redis refuses every fetch.
    const end = await outOfMemory(admin);
    let refused: number;
    try {
      const refusedBefore = await refusals();
      b.createWorker({ concurrency: 4 });
      await sleep(2_000);
      refused = (await refusals()) - refusedBefore;
    } finally {
      await end();
    }
    // 50 ms doubling to 1 s: about 6 tries per slot in 2 s (13 refusals in all, in a run). Before
    // the fix BullMQ fetched again at once after each refusal: 2,469 in a run.
    expect(refused).toBeLessThanOrEqual(100);
    await waitFor(() => seen.size === everyId, { timeoutMs: RECOVERED_WITHIN_MS, what: `all ${everyId} ids` });
  });
});
