/**
 * `npm run bench:incident [-- --runs=3]`: what a worker does through a Redis incident (issue 38
 * items 4 and 5). 800 ids over 10 keys, one worker with concurrency 4, `lockTtlMs` 30 s and
 * `recoveryIntervalMs` 500 ms (so a key freed by its lock's TTL shows as a 30 s wait), each run on
 * a throwaway redis-server of its own:
 *
 * - oom: Redis out of memory (`maxmemory` half of what it uses, `noeviction`) for 1.8 s while
 *   the keys run: the warning and error lines logged during it (and per second), the commands
 *   Redis served per second (INFO stats), and when the last id ran after memory came back;
 * - close: the same, with `worker.close()` called 100 ms into it: how long the close took, the key
 *   locks left once it returned, and when a new worker ran the last id after memory came back;
 * - busy: a script that keeps Redis busy for 1.5 s (`busy-reply-threshold` 100 ms: Redis answers
 *   BUSY meanwhile), then `SCRIPT KILL`: when the last id ran after the kill.
 */
import { Redis } from 'ioredis';
import type { Batcher, Logger } from '../src';
import { Keyspace } from '../src/storage/keys';
import { startRedis, type LocalRedis } from '../tools/redis-server';
import { INCIDENT_IDS, INCIDENT_KEYS, incidentBatcher, outOfMemory } from '../test/fixtures/incident';

const arg = (name: string, fallback: number) => Number(process.argv.find((a) => a.startsWith(`--${name}=`))?.split('=')[1] ?? fallback);
const RUNS = arg('runs', 3);
const INCIDENT_MS = { oom: 1_800, busy: 1_500 };
const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

async function until(check: () => boolean, timeoutMs = 60_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!check() && Date.now() < deadline) await sleep(5);
}

interface Setup {
  server: LocalRedis;
  admin: Redis;
  seen: Map<string, number>;
  lines: number[];
  worker: () => ReturnType<Batcher['createWorker']>;
  close: () => Promise<void>;
}

async function setup(): Promise<Setup> {
  const server = await startRedis();
  const admin = new Redis({ host: '127.0.0.1', port: server.port });
  const seen = new Map<string, number>();
  const lines: number[] = [];
  const line = () => void lines.push(Date.now());
  const logger: Logger = { warn: line, error: line };
  const b = await incidentBatcher(server.port, 'incident', logger, (id) => {
    if (!seen.has(id)) seen.set(id, Date.now());
  });
  return {
    server,
    admin,
    seen,
    lines,
    worker: () => b.createWorker({ concurrency: 4 }),
    close: async () => {
      await b.close();
      admin.disconnect();
      await server.stop();
    },
  };
}

const commands = async (admin: Redis) => Number(/total_commands_processed:(\d+)/.exec(await admin.info('stats'))![1]);
const lastRun = (seen: Map<string, number>) => Math.max(...seen.values());
const all = INCIDENT_IDS;

async function oom(withClose: boolean): Promise<Record<string, number | string>> {
  const s = await setup();
  const worker = s.worker();
  await until(() => s.seen.size >= 100);
  const before = await commands(s.admin);
  const end = await outOfMemory(s.admin);
  const from = Date.now();
  let closeMs = 0;
  const closing = withClose
    ? sleep(100).then(async () => ((closeMs = Date.now()), await worker.close(), (closeMs = Date.now() - closeMs)))
    : undefined;
  await sleep(INCIDENT_MS.oom);
  await end();
  const back = Date.now();
  const served = (await commands(s.admin)) - before;
  const logged = s.lines.filter((at) => at >= from && at <= back).length;
  const result: Record<string, number | string> = {
    'lines logged': logged,
    'lines/s': Math.round(logged / ((back - from) / 1000)),
    'Redis commands/s': Math.round(served / ((back - from) / 1000)),
  };
  if (closing) {
    await closing;
    const locks = await s.admin.exists(...INCIDENT_KEYS.map((k) => new Keyspace('bull', 'incident').forKey(k).lock));
    result['close ms'] = closeMs;
    result['locks left'] = locks;
    s.worker();
  }
  await until(() => s.seen.size === all);
  result['ids run'] = `${s.seen.size}/${all}`;
  result['last id, ms after memory back'] = lastRun(s.seen) - back;
  await s.close();
  return result;
}

async function busy(): Promise<Record<string, number | string>> {
  const s = await setup();
  await s.admin.config('SET', 'busy-reply-threshold', '100');
  const spinner = new Redis({ host: '127.0.0.1', port: s.server.port });
  await spinner.ping();
  s.worker();
  await until(() => s.seen.size >= 100);
  const spinning = spinner.eval('while true do redis.call("TIME") end', 0).catch(() => undefined);
  await sleep(INCIDENT_MS.busy);
  await s.admin.script('KILL');
  const killed = Date.now();
  await spinning;
  spinner.disconnect();
  await until(() => s.seen.size === all);
  const result = { 'ids run': `${s.seen.size}/${all}`, 'last id, ms after the kill': Math.max(0, lastRun(s.seen) - killed) };
  await s.close();
  return result;
}

async function main(): Promise<void> {
  for (const [name, scenario] of [
    ['oom', () => oom(false)],
    ['close', () => oom(true)],
    ['busy', busy],
  ] as const) {
    const rows: Record<string, number | string>[] = [];
    for (let run = 0; run < RUNS; run++) rows.push(await scenario());
    console.log(`\n${name} (${RUNS} runs)`);
    console.table(rows);
  }
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
