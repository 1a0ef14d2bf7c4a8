import { systemFor, type SystemSpec } from '../systems';
import { WorkerPool } from '../worker/host';
import { now, sleep, withTimeout } from './clock';
import { readCommandStats, resetCommandStats, type CommandStat } from './commandstats';
import { LIGHT_PREFIX, LightPusher, type LightPlan, type LightResult } from './light';
import { measuredFill, newTarget } from './fill';
import { backlogCalls, keyNames } from './push';
import { withFreshRedis } from './redis';
import { readSlowlog, startSlowlog, type SlowlogProfile } from './slowlog';
import { perSecond } from './stats';

/** Calls that fill a backlog: performBatchLater-sized, four callers unless the workload says (setup speed only, not measured here). */
const FILL_CALL_SIZE = 1000;
const FILL_CALLERS = 4;

/**
 * One measured run of one system: fill a backlog, start worker processes, optionally push light
 * keys during the drain, wait until every id is processed (or the deadline), and read the figures.
 * Every scenario except enqueue and memory is this with other parameters.
 */
export interface Workload {
  system: SystemSpec;
  processes: number;
  /** Per worker process. */
  concurrency: number;
  costPerIdUs: number;
  backlog: { keys: number; idsPerKey: number };
  light?: LightPlan;
  timeoutMs: number;
  /**
   * For a backlog too big to drain in the bench's time: heavy ids processed in the first
   * `windowMs` give the throughput, and the run stops once the window is over and every light id
   * is processed, leaving the rest of the backlog undrained. Needs `light`.
   */
  windowMs?: number;
  /** Log every Redis command of the drain (SLOWLOG) to count round trips; slows the run down. */
  profile?: boolean;
  /** Concurrent callers filling the backlog (default 4); many small calls (one per key) need more. */
  fillCallers?: number;
  /**
   * Read INFO commandstats and Redis CPU of the fill (reset before it, read after it) and of the
   * drain (reset after the fill, read once every id is processed).
   */
  commandstats?: boolean;
}

export interface WorkloadResult {
  system: string;
  backlogIds: number;
  /** Redis used_memory added by the backlog, per id, before any was processed. */
  bytesPerPendingId: number;
  /** Ids processed; may exceed the total if a system redelivers. */
  processed: number;
  expected: number;
  timedOut: boolean;
  /** From the workers' start to the last id processed. */
  drainMs: number;
  idsPerSec: number;
  light?: LightResult;
  /** With `windowMs`: heavy (non-light) ids processed from the workers' start to the window's end. */
  window?: { ms: number; heavyIds: number; heavyIdsPerSec: number };
  workerRssReadyMb: number;
  workerRssEndMb: number;
  /** Worker processes' CPU (all of them) per id processed. */
  workerCpuUsPerId: number;
  /** redis-server CPU per id processed, during the drain. */
  redisCpuUsPerId: number;
  slowlog?: SlowlogProfile;
  /** With `commandstats`: INFO commandstats from the workers' start to the end of the run. */
  commandstats?: CommandStat[];
  /** With `commandstats`: INFO commandstats of the fill, redis-server CPU (µs) over it, and its time. */
  fill?: { commandstats: CommandStat[]; redisCpuUs: number; ms: number };
}

const mb = (bytes: number) => bytes / (1024 * 1024);

export async function runWorkload(w: Workload): Promise<WorkloadResult> {
  const system = systemFor(w.system);
  return withFreshRedis(async (redis) => {
    const target = newTarget(redis);
    const producer = await system.producer(target);
    let pool: WorkerPool | undefined;
    let light: LightPusher | undefined;
    try {
      const calls = backlogCalls(keyNames('heavy-', w.backlog.keys), w.backlog.idsPerKey, FILL_CALL_SIZE);
      if (w.commandstats) await resetCommandStats(redis);
      const fillCpuBefore = await redis.cpuMicros();
      const fill = await measuredFill(redis, producer, calls, w.fillCallers ?? FILL_CALLERS, w.timeoutMs, system.label);
      const fillStats = w.commandstats
        ? { commandstats: await readCommandStats(redis), redisCpuUs: (await redis.cpuMicros()) - fillCpuBefore, ms: fill.ms }
        : undefined;
      const backlogIds = fill.ids;
      pool = await WorkerPool.fork(w.processes, {
        system: w.system,
        target,
        concurrency: w.concurrency,
        costPerIdUs: w.costPerIdUs,
        lightPrefix: LIGHT_PREFIX,
      });
      if (w.profile) await startSlowlog(redis);
      if (w.commandstats) await resetCommandStats(redis);
      const cpuBefore = await redis.cpuMicros();
      const startAt = pool.start();
      if (w.light) {
        light = new LightPusher(w.light, producer);
        light.start();
      }
      const expected = backlogIds + (light?.total ?? 0);
      let window: WorkloadResult['window'];
      let done: boolean;
      if (w.windowMs === undefined) {
        done = await pool.waitProcessed(expected, w.timeoutMs);
      } else {
        if (!light) throw new Error('a windowed run stops when its light ids are processed: it needs light keys');
        await sleep(startAt + w.windowMs - now());
        // Progress messages carry the processed count and the light samples together, so the difference is heavy ids.
        const ms = now() - startAt;
        const heavyIds = pool.processed - pool.light.length;
        window = { ms, heavyIds, heavyIdsPerSec: perSecond(heavyIds, ms) };
        done = await pool.waitLight(light.total, w.timeoutMs - ms);
      }
      const redisCpu = (await redis.cpuMicros()) - cpuBefore;
      const slowlog = w.profile ? await readSlowlog(redis) : undefined;
      const commandstats = w.commandstats ? await readCommandStats(redis) : undefined;
      light?.cancel();
      const running = pool;
      pool = undefined;
      const finals = await running.stop();
      const processed = finals.reduce((n, f) => n + f.processed, 0);
      const drainMs = Math.max(...finals.map((f) => f.lastAt)) - startAt;
      return {
        system: system.label,
        backlogIds,
        bytesPerPendingId: fill.bytesPerId,
        processed,
        expected,
        timedOut: !done,
        drainMs,
        idsPerSec: perSecond(processed, drainMs),
        ...(light ? { light: light.result(running.light) } : {}),
        ...(window ? { window } : {}),
        workerRssReadyMb: mb(Math.max(...finals.map((f) => f.rssReady))),
        workerRssEndMb: mb(Math.max(...finals.map((f) => f.rssEnd))),
        workerCpuUsPerId: finals.reduce((n, f) => n + f.cpuMicros, 0) / Math.max(1, processed),
        redisCpuUsPerId: redisCpu / Math.max(1, processed),
        ...(slowlog ? { slowlog } : {}),
        ...(commandstats ? { commandstats } : {}),
        ...(fillStats ? { fill: fillStats } : {}),
      };
    } finally {
      light?.cancel();
      await pool?.stop().catch(() => undefined);
      await withTimeout(producer.close(), 10_000, `${system.label} producer close`);
    }
  });
}
