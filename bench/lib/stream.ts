import type { StreamPlan } from '../config';

/** What one stream run reads of its scenario's plan. */
export type StreamRunPlan = Pick<StreamPlan, 'keys' | 'durationMs' | 'concurrency' | 'keptUpMs' | 'maxInFlight' | 'seed'>;
import { systemFor, type SystemSpec } from '../systems';
import { WorkerPool } from '../worker/host';
import { now, seededRandom, withTimeout } from './clock';
import { newTarget } from './fill';
import { pace } from './pace';
import { withFreshRedis } from './redis';
import { percentile, summarize, type LatencySummary } from './stats';

/** Stream keys carry this prefix: the worker reports each of their ids with the time it was processed. */
export const STREAM_PREFIX = 'stream-';

/** The pusher reached its rate if it sent at least this share of the planned pushes. */
const REACHED = 0.98;
/** p99 is growing if the last third's exceeds the first third's by this factor plus SLACK_MS. */
const GROWTH_FACTOR = 2;
const GROWTH_SLACK_MS = 50;

/** The kept-up rule, for setup lines. */
export const keptUpRule = (graceMs: number): string =>
  `Kept up: every id processed within ${graceMs.toLocaleString('en-US')} ms (the grace period) after the stream's end, p99 over the ` +
  `whole stream within the grace period too, ` +
  `and p99 not growing (the p99 of the ids pushed in the stream's last third at most ${GROWTH_FACTOR}× that of its first third + ` +
  `${GROWTH_SLACK_MS} ms).`;

export type KeptUp = 'yes' | 'ids left' | 'p99 over grace' | 'p99 growing';

export interface StreamRun {
  system: string;
  targetPerSec: number;
  /** Pushes sent per second of the stream; below the target when the pusher itself could not keep the pace. */
  achievedPerSec: number;
  pusherReached: boolean;
  pushed: number;
  pushErrors: number;
  /** Distinct stream ids processed by the time the workers were stopped. */
  processed: number;
  missing: number;
  /**
   * Push (start of the call) to processed (handler call), per id. An id not processed when the run
   * stopped counts with its wait so far, a lower bound: then `censored` is true and p99/max are at least these.
   */
  latency: LatencySummary;
  censored: boolean;
  /** The smallest wait of an id not processed (Infinity when none): a percentile below it is exact, at or above it a lower bound. */
  minCensoredMs: number;
  /** p99 of the ids pushed in the first and in the last third of the stream (same lower-bound rule). */
  p99FirstThird: number;
  p99LastThird: number;
  /** Every id processed within keptUpMs of the stream's end. */
  allProcessedInTime: boolean;
  /** 'yes', or the first part of keptUpRule that failed. */
  keptUp: KeptUp;
  /** How long the push call itself took (start to resolve). */
  pushCallP99Ms: number;
  workerCpuUsPerId: number;
  redisCpuUsPerId: number;
  /** Ids per handler call (a slice of ours, 1 for a job per id). */
  idsPerSlice: number;
}

/**
 * One system under a steady stream of single-id pushes to random keys (seeded: every system gets the
 * same keys in the same order): one worker process, the pusher in this process. Each push is its
 * own call, not awaited before the next, at most `maxInFlight` at a time.
 */
export async function runStream(spec: SystemSpec, plan: StreamRunPlan, ratePerSec: number): Promise<StreamRun> {
  const system = systemFor(spec);
  const planned = Math.round((ratePerSec * plan.durationMs) / 1000);
  return withFreshRedis(async (redis) => {
    const target = newTarget(redis);
    const producer = await system.producer(target);
    let pool: WorkerPool | undefined;
    try {
      pool = await WorkerPool.fork(1, { system: spec, target, concurrency: plan.concurrency, costPerIdUs: 0, lightPrefix: STREAM_PREFIX });
      const keys = Array.from({ length: plan.keys }, (_, k) => `${STREAM_PREFIX}${String(k).padStart(4, '0')}`);
      const random = seededRandom(plan.seed);
      const pushedAt = new Float64Array(planned).fill(Number.NaN);

      const cpuBefore = await redis.cpuMicros();
      const startAt = pool.start();
      const paced = await pace(
        { ratePerSec, count: planned, untilMs: plan.durationMs, maxInFlight: plan.maxInFlight, startAt },
        (seq, at) => {
          pushedAt[seq] = at;
          return producer.push(keys[Math.floor(random() * keys.length)]!, [String(seq)]);
        },
      );
      const { issued, endAt } = paced;
      const graceLeft = () => Math.max(0, endAt + plan.keptUpMs - now());
      const allProcessedInTime = (await paced.settled(graceLeft())) && (await pool.waitLight(issued - paced.failed.size, graceLeft()));
      const stopAt = now();
      const redisCpu = (await redis.cpuMicros()) - cpuBefore;
      // Pushes still in flight after the grace period get a few more seconds to settle before the producer closes.
      await paced.settled(5_000);
      for (const seq of paced.failed) pushedAt[seq] = Number.NaN;
      const errors = paced.failed.size;
      const running = pool;
      pool = undefined;
      const finals = await running.stop();

      const processedAt = new Float64Array(issued).fill(Number.NaN);
      for (const [id, at] of running.light) {
        const seq = Number(id);
        if (seq < issued && Number.isNaN(processedAt[seq]!)) processedAt[seq] = at;
      }
      const latencies: number[] = [];
      let processed = 0;
      let minCensoredMs = Number.POSITIVE_INFINITY;
      for (let seq = 0; seq < issued; seq++) {
        const pushed = pushedAt[seq]!;
        if (Number.isNaN(pushed)) continue;
        const done = processedAt[seq]!;
        if (!Number.isNaN(done)) processed++;
        else minCensoredMs = Math.min(minCensoredMs, stopAt - pushed);
        latencies.push((Number.isNaN(done) ? stopAt : done) - pushed);
      }
      const third = Math.floor(latencies.length / 3);
      const p99Of = (part: number[]) =>
        percentile(
          part.sort((a, b) => a - b),
          99,
        );
      const p99FirstThird = p99Of(latencies.slice(0, third));
      const p99LastThird = p99Of(latencies.slice(latencies.length - third));
      const latency = summarize(latencies);
      const growing = p99LastThird > GROWTH_FACTOR * p99FirstThird + GROWTH_SLACK_MS;
      const keptUp: KeptUp = !allProcessedInTime
        ? 'ids left'
        : latency.p99 > plan.keptUpMs
          ? 'p99 over grace'
          : growing
            ? 'p99 growing'
            : 'yes';
      const workerCpu = finals.reduce((n, f) => n + f.cpuMicros, 0);
      const calls = finals.reduce((n, f) => n + f.calls, 0);
      // Pushes start only within the stream's duration: late ticks (a busy event loop) lose pushes, not time.
      const achievedPerSec = (issued * 1000) / plan.durationMs;
      return {
        system: system.label,
        targetPerSec: ratePerSec,
        achievedPerSec,
        pusherReached: issued >= REACHED * planned,
        pushed: issued - errors,
        pushErrors: errors,
        processed,
        missing: issued - errors - processed,
        latency,
        censored: processed < issued - errors,
        minCensoredMs,
        p99FirstThird,
        p99LastThird,
        allProcessedInTime,
        keptUp,
        pushCallP99Ms: summarize(paced.callMs).p99,
        workerCpuUsPerId: workerCpu / Math.max(1, processed),
        redisCpuUsPerId: redisCpu / Math.max(1, processed),
        idsPerSlice: processed / Math.max(1, calls),
      };
    } finally {
      await pool?.stop().catch(() => undefined);
      await withTimeout(producer.close(), 10_000, `${system.label} producer close`);
    }
  });
}
