/**
 * `npm run soak [-- --minutes=N]` (default 3): the chaos test (test/chaos.test.ts) for minutes.
 * Rounds of two pusher processes (1,000 single ids each over 50 keys) against two worker
 * processes, with a fault every 0.5–2 s taken in turn from: SIGKILL a worker (and start another),
 * CLIENT KILL every connection, SCRIPT FLUSH and FUNCTION FLUSH, restart Redis (AOF, same port). After each round,
 * every id whose push resolved must be processed within 60 s. Prints a table of the rounds; exits
 * 1 if a round lost an id or a worker did not close cleanly at the end.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startRedis, type LocalRedis } from '../tools/redis-server';
import { adminClient, persistentRedis, startChaosWorker } from './helpers/chaos';
import { startPushProcess, stopProcess } from './helpers/processes';
import { sleep } from './helpers/time';

const FAULTS = ['SIGKILL a worker', 'CLIENT KILL', 'SCRIPT FLUSH', 'FUNCTION FLUSH', 'Redis restart'] as const;

interface Round {
  round: number;
  acked: number;
  processed: number;
  duplicates: number;
  faults: string;
  catchUpMs: number;
  lost: number;
}

async function main(): Promise<void> {
  const minutes = Number(process.argv.find((a) => a.startsWith('--minutes='))?.slice('--minutes='.length) ?? 3);
  if (!(minutes > 0)) throw new Error('--minutes must be a number > 0');
  const dir = mkdtempSync(join(tmpdir(), 'bbk-soak-'));
  const persistent = persistentRedis(dir);
  let server: LocalRedis = await startRedis(persistent);
  const { port, url } = server;
  const admin = () => adminClient(port);
  const name = 'soak';
  const start = () => startChaosWorker(url, name);
  const workers = [await start(), await start()];
  const rounds: Round[] = [];
  const endAt = Date.now() + minutes * 60_000;
  let next = 0;
  try {
    for (let round = 1; Date.now() < endAt; round++) {
      const acked = new Set<string>();
      const pushers = ['a', 'b'].map((p) =>
        startPushProcess({ redisUrl: url, name, prefix: `${round}${p}`, ids: 1000, keys: 50, pauseMs: 10 }, acked),
      );
      const applied: string[] = [];
      while (pushers.some((p) => !p.finished())) {
        await sleep(500 + Math.random() * 1500);
        const fault = FAULTS[next++ % FAULTS.length]!;
        if (fault === 'SIGKILL a worker') {
          const victim = Math.floor(Math.random() * workers.length);
          await stopProcess(workers[victim]!, 'SIGKILL');
          workers[victim] = await start();
        } else if (fault === 'Redis restart') {
          await server.stop();
          server = await startRedis(persistent, port);
        } else {
          const a = admin();
          const act =
            fault === 'CLIENT KILL'
              ? a.client('KILL', 'TYPE', 'normal', 'SKIPME', 'yes')
              : fault === 'SCRIPT FLUSH'
                ? a.script('FLUSH')
                : a.call('FUNCTION', 'FLUSH');
          await act.catch(() => undefined);
          await a.quit().catch(() => undefined);
        }
        applied.push(fault);
      }
      await Promise.all(pushers.map((p) => p.done));
      const redis = admin();
      const key = `${name}:processed`;
      const caughtUp = Date.now();
      const ofRound = (id: string) => id.startsWith(`${round}a-`) || id.startsWith(`${round}b-`);
      let mine: string[] = [];
      let seen = new Set<string>();
      while (Date.now() - caughtUp < 60_000) {
        mine = (await redis.lrange(key, 0, -1).catch(() => [] as string[])).filter(ofRound);
        seen = new Set(mine);
        if ([...acked].every((id) => seen.has(id))) break;
        await sleep(100);
      }
      rounds.push({
        round,
        acked: acked.size,
        processed: seen.size,
        duplicates: mine.length - new Set(mine).size,
        faults: applied.join(', '),
        catchUpMs: Date.now() - caughtUp,
        lost: [...acked].filter((id) => !seen.has(id)).length,
      });
      console.log(`round ${round}: ${acked.size} acknowledged, ${rounds.at(-1)!.lost} lost, ${applied.length} faults`);
      await redis.quit().catch(() => undefined);
    }
  } finally {
    const codes = await Promise.all(
      workers.map((w) => new Promise((resolve) => (w.once('exit', (code) => resolve(code)), w.kill('SIGTERM')))),
    );
    await server.stop();
    rmSync(dir, { recursive: true, force: true });
    console.log(
      '\n| round | ids acknowledged | processed | duplicates | lost | caught up in ms | faults |\n|---:|---:|---:|---:|---:|---:|---|',
    );
    for (const r of rounds)
      console.log(`| ${r.round} | ${r.acked} | ${r.processed} | ${r.duplicates} | ${r.lost} | ${r.catchUpMs} | ${r.faults} |`);
    const lost = rounds.reduce((n, r) => n + r.lost, 0);
    console.log(`\n${rounds.length} rounds, ${lost} ids lost, worker exit codes on SIGTERM: ${codes.join(', ')}`);
    process.exitCode = lost > 0 || codes.some((c) => c !== 0) ? 1 : 0;
  }
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
