import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { startRedis, type LocalRedis } from '../tools/redis-server';
import { adminClient, persistentRedis, startChaosWorker } from './helpers/chaos';
import { startPushProcess, stopProcess } from './helpers/processes';
import { waitFor } from './helpers/redis';
import { sleep } from './helpers/time';

// A Redis of its own, with AOF, that the test restarts on the same port.
const dir = mkdtempSync(join(tmpdir(), 'bbk-chaos-'));
const persistent = persistentRedis(dir);
let server: LocalRedis | undefined;
afterAll(async () => {
  await server?.stop();
  rmSync(dir, { recursive: true, force: true });
});

describe('chaos: pushers and workers in their own processes through kills, dropped connections, SCRIPT and FUNCTION FLUSH and a Redis restart', () => {
  it('processes every id whose push resolved, strands no key, and every process closes cleanly', async () => {
    server = await startRedis(persistent);
    const { port, url } = server;
    const name = 'chaos';
    const acked = new Set<string>();
    // They push until told to stop, so every fault below lands while pushes are under way.
    const pusher = (prefix: string) => startPushProcess({ redisUrl: url, name, prefix, ids: 100_000, keys: 25, pauseMs: 10 }, acked);
    const pushers = [pusher('a'), pusher('b')];
    const start = () => startChaosWorker(url, name);
    let workers = [await start(), await start()];
    const admin = () => adminClient(port);

    const faults: string[] = [];
    const fault = async (what: string, act: () => Promise<unknown>) => {
      await sleep(700);
      await act();
      faults.push(what);
    };
    await fault('SIGKILL a worker', async () => {
      await stopProcess(workers[0]!, 'SIGKILL');
      workers = [workers[1]!, await start()];
    });
    await fault('CLIENT KILL', async () => {
      const a = admin();
      await a.client('KILL', 'TYPE', 'normal', 'SKIPME', 'yes');
      await a.quit();
    });
    // Our scripts are functions on Redis 7 (BullMQ's and redlock's go by EVALSHA): both vanish.
    await fault('SCRIPT FLUSH and FUNCTION FLUSH', async () => {
      const a = admin();
      await a.script('FLUSH');
      await a.call('FUNCTION', 'FLUSH');
      await a.quit();
    });
    await fault('Redis restart', async () => {
      await server!.stop();
      server = await startRedis(persistent, port);
    });
    await fault('SIGKILL a worker', async () => {
      await stopProcess(workers[1]!, 'SIGKILL');
      workers = [workers[0]!, await start()];
    });
    expect(faults).toHaveLength(5);
    expect(pushers.map((p) => p.finished())).toEqual([false, false]);
    for (const p of pushers) p.stop();

    const exits = await Promise.all(pushers.map((p) => p.done));
    // Pushes whose call rejected (the restart, a dropped connection) were retried until one resolved.
    expect(exits).toEqual([0, 0]);
    expect(acked.size).toBeGreaterThan(200);
    const redis = admin();
    try {
      const allProcessed = async () => {
        const processed = new Set(await redis.lrange(`${name}:processed`, 0, -1));
        return [...acked].every((id) => processed.has(id));
      };
      await waitFor(allProcessed, { what: 'every acknowledged id processed', timeoutMs: 30_000 });
      const processed = new Set(await redis.lrange(`${name}:processed`, 0, -1));
      for (const id of acked) expect(processed.has(id)).toBe(true);
      // Graceful stops: each worker's close resolves and the process exits 0 (no unhandled error).
      const codes = await Promise.all(
        workers.map(
          (w) =>
            new Promise((resolve) => {
              w.once('exit', (code) => resolve(code));
              w.kill('SIGTERM');
            }),
        ),
      );
      expect(codes).toEqual([0, 0]);
    } finally {
      await redis.quit();
    }
  });
});
