/**
 * The one-process stream (issue 40): a small service's shape, where the pusher and a worker
 * (concurrency 16) share one Node process. Single-id pushes to random keys out of 1,000 at each
 * rate, ours and plain BullMQ (one job per id) side by side in the same run, each on a fresh Redis.
 *
 * Per system and rate: push-to-processed p50/p99, split into the push call (start to resolve) and
 * the rest (resolve to the handler call); the longest event-loop stall (perf_hooks
 * monitorEventLoopDelay); this process's and Redis's CPU per id; script calls per push and the
 * deepest BullMQ wait list seen (a queue that ids wait in behind other keys' jobs).
 *
 *   npx tsx bench/one-process.ts [rates=1000,2000,4000] [seconds=5] [systems=ours,ours-single,bullmq-per-id]
 *
 * Profile what runs for long at once: `node --cpu-prof --import tsx bench/one-process.ts 4000 5 ours`.
 * The machine may be shared: read the ratios within one run, not the absolute figures.
 */
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { Redis } from 'ioredis';
import { now, seededRandom, sleep, withTimeout } from './lib/clock';
import { readCommandStats, resetCommandStats, SCRIPTS } from './lib/commandstats';
import { newTarget } from './lib/fill';
import { pace } from './lib/pace';
import { withFreshRedis } from './lib/redis';
import { summarize } from './lib/stats';
import { systemFor, type SystemSpec } from './systems';

const KEYS = 1000;
const CONCURRENCY = 16;
const MAX_IN_FLIGHT = 5000;
/** How long after the stream's end ids may still be processed before the run stops. */
const GRACE_MS = 10_000;
/** Pushes processed before the stream, untimed. */
const WARM_UP = 200;

const [rateArg = '1000,2000,4000', secondsArg = '5', systemsArg = 'ours,ours-single,bullmq-per-id'] = process.argv.slice(2);
const rates = rateArg.split(',').map(Number);
const durationMs = Number(secondsArg) * 1000;
/** `ours-single`: ours with each push its own script call (pushesPerCall 1), as before group commit. */
const specs = systemsArg
  .split(',')
  .map((id): SystemSpec => (id === 'ours-single' ? { id: 'ours', variant: { pushesPerCall: 1 } } : ({ id } as SystemSpec)));

interface Row {
  system: string;
  rate: number;
  sent: number;
  processed: number;
  p50: number;
  p99: number;
  callP50: number;
  callP99: number;
  afterP50: number;
  afterP99: number;
  stallMaxMs: number;
  stallP99Ms: number;
  nodeCpuUs: number;
  redisCpuUs: number;
  scriptsPerPush: number;
  waitDepthMax: number;
  idsPerCall: number;
}

async function runOne(spec: SystemSpec, rate: number): Promise<Row> {
  const system = systemFor(spec);
  const planned = Math.round((rate * durationMs) / 1000);
  return withFreshRedis(async (redis) => {
    const target = newTarget(redis);
    const pushedAt = new Float64Array(planned).fill(Number.NaN);
    const resolvedAt = new Float64Array(planned).fill(Number.NaN);
    const processedAt = new Float64Array(planned).fill(Number.NaN);
    let processed = 0;
    let handlerCalls = 0;
    const producer = await system.producer(target);
    const consumer = await system.consumer(target, {
      concurrency: CONCURRENCY,
      handler: (_key, ids) => {
        handlerCalls++;
        const at = now();
        for (const id of ids) {
          const seq = Number(id);
          if (seq >= planned) processed++;
          else if (Number.isNaN(processedAt[seq]!)) {
            processedAt[seq] = at;
            processed++;
          }
        }
      },
    });
    // BullMQ's wait list of the queue, sampled: how many jobs an id's job waits behind.
    const probe = new Redis(redis.url, { maxRetriesPerRequest: null });
    const waitList = `bull:${target.namespace}:wait`;
    let waitDepthMax = 0;
    let sampling = true;
    const sampler = (async () => {
      while (sampling) {
        waitDepthMax = Math.max(waitDepthMax, await probe.llen(waitList));
        await sleep(20);
      }
    })();
    const keys = Array.from({ length: KEYS }, (_, k) => `k${String(k).padStart(4, '0')}`);
    const random = seededRandom(42);
    // Warm up untimed (script loading, connections, the first jobs): ids outside the stream's range.
    consumer.start();
    const warm = Array.from({ length: WARM_UP }, (_, i) => planned + i);
    await Promise.all(warm.map((seq) => producer.push(keys[seq % KEYS]!, [String(seq)])));
    while (processed < WARM_UP) await sleep(10);
    processed = 0;
    handlerCalls = 0;
    waitDepthMax = 0;
    await resetCommandStats(redis);
    const loop = monitorEventLoopDelay({ resolution: 5 });
    const cpuBefore = process.cpuUsage();
    const redisBefore = await redis.cpuMicros();
    loop.enable();
    const paced = await pace(
      { ratePerSec: rate, count: planned, untilMs: durationMs, maxInFlight: MAX_IN_FLIGHT, startAt: now() + 50 },
      (seq, at) => {
        pushedAt[seq] = at;
        return producer.push(keys[Math.floor(random() * keys.length)]!, [String(seq)]).then(() => {
          resolvedAt[seq] = now();
        });
      },
    );
    const deadline = paced.endAt + GRACE_MS;
    while (processed < paced.issued - paced.failed.size && now() < deadline) await sleep(10);
    loop.disable();
    const cpu = process.cpuUsage(cpuBefore);
    const redisCpu = (await redis.cpuMicros()) - redisBefore;
    const stats = await readCommandStats(redis);
    sampling = false;
    await sampler;
    probe.disconnect();
    await paced.settled(5_000);
    await withTimeout(consumer.close(), 10_000, 'consumer close').catch(() => undefined);
    await withTimeout(producer.close(), 10_000, 'producer close').catch(() => undefined);
    const total: number[] = [];
    const call: number[] = [];
    const after: number[] = [];
    for (let seq = 0; seq < paced.issued; seq++) {
      const pushed = pushedAt[seq]!;
      const resolved = resolvedAt[seq]!;
      const done = processedAt[seq]!;
      if (Number.isNaN(pushed) || Number.isNaN(done)) continue;
      total.push(done - pushed);
      if (!Number.isNaN(resolved)) {
        call.push(resolved - pushed);
        after.push(Math.max(0, done - resolved));
      }
    }
    const t = summarize(total);
    const c = summarize(call);
    const a = summarize(after);
    const scripts = stats.filter((s) => SCRIPTS.has(s.command) || s.command.startsWith('fcall')).reduce((n, s) => n + s.calls, 0);
    const done = Math.max(1, processed);
    return {
      system: system.label,
      rate,
      sent: Math.round((paced.issued * 1000) / durationMs),
      processed,
      p50: t.p50,
      p99: t.p99,
      callP50: c.p50,
      callP99: c.p99,
      afterP50: a.p50,
      afterP99: a.p99,
      stallMaxMs: loop.max / 1e6,
      stallP99Ms: loop.percentile(99) / 1e6,
      nodeCpuUs: (cpu.user + cpu.system) / done,
      redisCpuUs: redisCpu / done,
      scriptsPerPush: scripts / Math.max(1, paced.issued),
      waitDepthMax,
      idsPerCall: processed / Math.max(1, handlerCalls),
    };
  });
}

const f = (v: number, d = 1) => (Number.isFinite(v) ? v.toFixed(d) : '-');

async function main(): Promise<void> {
  const rows: Row[] = [];
  for (const rate of rates) {
    for (const spec of specs) {
      const row = await runOne(spec, rate);
      rows.push(row);
      console.error(`${row.system} ${rate}/s done`);
    }
  }
  console.log(
    '| system | pushes/s | sent/s | processed | p50 / p99 ms | push call p50 / p99 | resolve→processed p50 / p99 | ' +
      'stall max / p99 ms | Node CPU µs/id | Redis CPU µs/id | script calls/push | wait list max | ids/handler call |',
  );
  console.log('|---|---:|---:|---:|---|---|---|---|---:|---:|---:|---:|---:|');
  for (const r of rows) {
    console.log(
      `| ${r.system} | ${r.rate} | ${r.sent} | ${r.processed} | ${f(r.p50)} / ${f(r.p99)} | ${f(r.callP50)} / ${f(r.callP99)} | ` +
        `${f(r.afterP50)} / ${f(r.afterP99)} | ${f(r.stallMaxMs)} / ${f(r.stallP99Ms)} | ${f(r.nodeCpuUs, 0)} | ${f(r.redisCpuUs, 0)} | ` +
        `${f(r.scriptsPerPush, 2)} | ${r.waitDepthMax} | ${f(r.idsPerCall, 2)} |`,
    );
  }
}

main().then(
  () => process.exit(0),
  (err: unknown) => {
    console.error(err);
    process.exit(1);
  },
);
