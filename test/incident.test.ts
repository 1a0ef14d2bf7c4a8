import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { batchByKey, type Batcher, type Logger } from '../src';
import { redisFailureKind } from '../src/core/redis-errors';
import { Keyspace } from '../src/storage/keys';
import { startRedis, type LocalRedis } from '../tools/redis-server';
import { range, track, waitFor } from './helpers/redis';
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

const KEYS = range(10, 'k');
const IDS_PER_KEY = 80;
/** Far longer than the test's deadlines: a key that waits for its lock's TTL fails the test. */
const LOCK_TTL_MS = 30_000;
/** Well inside LOCK_TTL_MS, and many sweeps long. */
const RECOVERED_WITHIN_MS = 15_000;

interface Line {
  at: number;
  level: 'warn' | 'error';
  message: string;
  meta: Record<string, unknown>;
}

/** A batcher with 800 ids over 10 keys, a short sweep and a long lock, whose handler records what it saw and whose logger records every line. */
async function loaded(name: string): Promise<{ b: Batcher; seen: Set<string>; lines: Line[] }> {
  const seen = new Set<string>();
  const lines: Line[] = [];
  const line =
    (level: Line['level']) =>
    (message: string, meta: Record<string, unknown> = {}) =>
      void lines.push({ at: Date.now(), level, message, meta });
  const logger: Logger = { warn: line('warn'), error: line('error') };
  const b = track(
    batchByKey({
      name,
      connection: { host: '127.0.0.1', port: server.port, maxRetriesPerRequest: null },
      sliceSize: 10,
      lockTtlMs: LOCK_TTL_MS,
      recoveryIntervalMs: 500,
      backoff: { type: 'fixed', delayMs: 50 },
      attempts: 1000,
      logger,
      async eachIteration(ids) {
        await sleep(20);
        for (const id of ids) seen.add(id);
      },
    }),
  );
  for (const k of KEYS) await b.performBatchLater(range(IDS_PER_KEY, `${k}-`), { key: k });
  return { b, seen, lines };
}

const everyId = KEYS.length * IDS_PER_KEY;

/** Redis out of memory (`noeviction`: every write refused) for `ms`, then as before. */
async function outOfMemory(ms: number): Promise<void> {
  const used = Number(/used_memory:(\d+)/.exec(await admin.info('memory'))![1]);
  await admin.config('SET', 'maxmemory-policy', 'noeviction');
  await admin.config('SET', 'maxmemory', String(Math.floor(used / 2)));
  try {
    await sleep(ms);
  } finally {
    await admin.config('SET', 'maxmemory', '0');
  }
}

const lockNames = (name: string): string[] => KEYS.map((k) => new Keyspace('bull', name).forKey(k).lock);
const sawRefusal = (lines: Line[], code: string): boolean => lines.some((l) => redisFailureKind(l.meta.err) === code);

describe('a Redis incident mid-run: no key waits for its lock TTL afterwards', () => {
  it('out of memory for 1.8 s: every id of every key runs soon after, not lockTtlMs later', async () => {
    const { b, seen, lines } = await loaded('oom');
    b.createWorker({ concurrency: 4 });
    await waitFor(() => seen.size >= 100, { intervalMs: 5, what: 'runs under way' });
    await outOfMemory(1_800);
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
    await Promise.all([outOfMemory(1_800), sleep(100).then(() => (closing = worker.close()))]);
    await closing;
    expect(sawRefusal(lines, 'OOM')).toBe(true);
    // The close waited for its runs' releases, which Redis took once it answered.
    expect(await admin.exists(...lockNames(name))).toBe(0);
    b.createWorker({ concurrency: 4 });
    await waitFor(() => seen.size === everyId, { timeoutMs: RECOVERED_WITHIN_MS, what: `all ${everyId} ids` });
  });

  it('a busy script for 1.5 s, then SCRIPT KILL: every id of every key runs soon after', async () => {
    const { b, seen, lines } = await loaded('busy');
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
      await sleep(1_500);
      await killer.script('KILL');
      expect(String(await spinning)).toMatch(/killed/i);
      await waitFor(() => seen.size === everyId, { timeoutMs: RECOVERED_WITHIN_MS, what: `all ${everyId} ids` });
      expect(sawRefusal(lines, 'BUSY')).toBe(true);
    } finally {
      await admin.config('SET', 'busy-reply-threshold', '5000');
    }
  });

  it('logs a bounded number of lines during a 2 s outage: one per kind of failure per interval, with a count', async () => {
    const { b, seen, lines } = await loaded('oom-log');
    b.createWorker({ concurrency: 4 });
    await waitFor(() => seen.size >= 100, { intervalMs: 5, what: 'runs under way' });
    const from = Date.now();
    await outOfMemory(2_000);
    const to = Date.now();
    await waitFor(() => seen.size === everyId, { timeoutMs: RECOVERED_WITHIN_MS, what: `all ${everyId} ids` });
    const during = lines.filter((l) => l.at >= from && l.at <= to);
    const kinds = new Map<string, number>();
    for (const l of during) {
      const kind = `${l.level} ${l.message} ${redisFailureKind(l.meta.err)}`;
      kinds.set(kind, (kinds.get(kind) ?? 0) + 1);
    }
    expect(sawRefusal(lines, 'OOM')).toBe(true);
    // Before the fix: 2,700-4,000 lines. One interval (LOG_REPEAT_INTERVAL_MS, 1 s) per kind: the
    // first line, then one with the count at each interval's end.
    for (const [kind, count] of kinds) expect(count, kind).toBeLessThanOrEqual(3);
    expect(during.length).toBeLessThanOrEqual(30);
  });
});
