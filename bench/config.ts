import { DEFAULTS } from '../src/options';
import type { LightPlan } from './lib/light';
import type { OursVariant, SystemId } from './systems/types';

export type Mode = 'quick' | 'full';

/** Every size of every scenario, per mode. The full mode takes 12-13 minutes on a 2-core machine. */
export interface Config {
  mode: Mode;
  /**
   * Share of a scenario's ids given to the one-job-per-id systems (bullmq-per-id, groupmq), which
   * run about 100x fewer ids per second. Rates are per second, so they stay comparable.
   */
  slowShare: number;
  /** `repeats`: runs per system, in rounds; the median is reported (throughput figures are noisy on a shared VM). */
  drain: { keys: number; idsPerKey: number; concurrency: number; repeats: number; timeoutMs: number };
  enqueue: { keys: number; idsPerKey: number; callSize: number; callers: number[]; repeats: number; timeoutMs: number };
  noisy: { floodIds: number; concurrency: number; costPerIdUs: number; light: LightPlan; timeoutMs: number };
  oversubscribed: Contended;
  /** The oversubscribed workload with the same heavy ids split over many more keys (one tenant, many keys). */
  splitFlood: Contended;
  memory: { keys: number; idsPerKey: number; concurrency: number; timeoutMs: number };
  scaleOut: {
    systems: SystemId[];
    processes: number[];
    keys: number;
    idsPerKey: number;
    concurrency: number;
    repeats: number;
    timeoutMs: number;
  };
  profile: { keys: number; idsPerKey: number; concurrency: number; timeoutMs: number };
  /** Many accounts, small pushes: backlogs of many small keys (one push per key), drained. */
  smallKeys: { shapes: KeyShape[]; concurrency: number; fillCallers: number; timeoutMs: number };
  /** One id per key: every id is a key cycle of its own. Never scaled by slowShare. */
  oneIdKeys: { keys: number; concurrency: number; fillCallers: number; timeoutMs: number };
  stream: StreamPlan;
  waitToFill: WaitToFillPlan;
  cycleCost: { keys: number; ratePerSec: number; concurrency: number; idleMs: number; timeoutMs: number };
  /** Each hot script called `calls` times in a row, then its prelude and `return 0` as many times (see scenarios/script-micro.ts). */
  scriptMicro: { calls: number; timeoutMs: number };
  /** `pushes` pushes of `idsPerPush` ids over `keys` keys from `callers` callers, per tracePushes variant (see scenarios/push-tracing.ts). */
  pushTracing: { keys: number; pushes: number; idsPerPush: number; callers: number; repeats: number; timeoutMs: number };
  /** A controller that pushes, under open-loop HTTP load: warm at `lowRate` requests/s, then a jump to `highRate`. */
  controllerJump: { lowRate: number; highRate: number; warmMs: number; jumpMs: number; steadyMs: number };
  rateLimit: FlowPlan;
  /** History sampling: `processes` samplers of one batcher over `intervals` intervals, then an hour of samples' memory. */
  history: { keys: number; processes: number; intervals: number; intervalMs: number; timeoutMs: number };
  /** One batcher over a 3-master local Redis Cluster, per `shards` value (see scenarios/cluster-shards.ts). */
  clusterShards: {
    shardCounts: number[];
    keys: number;
    idsPerKey: number;
    fillCallers: number;
    concurrency: number;
    streamRatePerSec: number;
    streamMs: number;
    idleMs: number;
    heavyKeys: number;
    idsPerHeavyKey: number;
    heavyCostUs: number;
    lightPushes: number;
    lightEveryMs: number;
    timeoutMs: number;
  };
}

/** `rateLimit` option and `ctx.retryAfter`: what flow control costs the other keys, and Redis. */
export interface FlowPlan {
  /**
   * One key limited to `limit` beside `keys` unlimited keys with backlogs (empty handler), light
   * keys pushing meanwhile, several worker processes (the limit is global); figures from a
   * `windowMs` window after `warmupMs`, and again without the limited key (the control).
   */
  accuracy: {
    limit: { max: number; durationMs: number };
    limitedIds: number;
    keys: number;
    idsPerKey: number;
    processes: number;
    concurrency: number;
    light: LightPlan;
    warmupMs: number;
    windowMs: number;
    timeoutMs: number;
  };
  /**
   * `keys` keys with backlogs and one key with `retryingIds` whose handler calls
   * `ctx.retryAfter(retryAfterMs)` every `every`-th slice; the handler waits `sliceWaitMs` per
   * slice (a call to another service), one worker process; again with no retryAfter (the control).
   */
  retry: {
    keys: number;
    idsPerKey: number;
    retryingIds: number;
    every: number;
    retryAfterMs: number;
    sliceWaitMs: number;
    concurrency: number;
    warmupMs: number;
    windowMs: number;
    timeoutMs: number;
  };
  /**
   * The same backlog drained with a limit on every key that never binds, with batcher-wide limits
   * that never bind (UNREACHED_GLOBAL_LIMITS), and with none.
   */
  cost: {
    keys: number;
    idsPerKey: number;
    concurrency: number;
    /** The default; it divides idsPerKey, so every slice is full. */
    sliceSize: number;
    limit: { max: number; durationMs: number };
    timeoutMs: number;
  };
}

/**
 * The stream's single-id pushes with wait to fill: ours once per `maxWaitsMs` value (with
 * `minSliceSize`), beside one BullMQ job per id, per rate.
 */
export interface WaitToFillPlan extends Omit<StreamPlan, 'fifoRow'> {
  maxWaitsMs: number[];
  minSliceSize: number;
}

export interface KeyShape {
  keys: number;
  idsPerKey: number;
}

/** Single-id pushes to random keys at a steady rate while one worker process keeps up (or not). */
export interface StreamPlan {
  keys: number;
  ratesPerSec: number[];
  durationMs: number;
  concurrency: number;
  /** The grace period of the kept-up rule (keptUpRule in lib/stream.ts); the run stops this long after the stream's end. */
  keptUpMs: number;
  /** Pushes in flight at most; past it the pusher falls behind its rate, and says so. */
  maxInFlight: number;
  seed: number;
  /** Also run ours with scheduling 'fifo' (full mode; quick mode leaves it out for time). */
  fifoRow: boolean;
}

/**
 * Heavy keys that outnumber the worker slots, light keys pushing meanwhile. The backlog takes
 * longer to drain than the bench can wait, so throughput is measured over `windowMs` (see Workload).
 */
export interface Contended {
  heavyKeys: number;
  idsPerHeavyKey: number;
  concurrency: number;
  costPerIdUs: number;
  light: LightPlan;
  windowMs: number;
  timeoutMs: number;
}

/** The systems that add one BullMQ/groupmq job per id. */
/**
 * Batcher-wide limits that no run reaches (`globalRateLimit` at most 2^31 - 1 ids a window,
 * `globalConcurrency` at most 1,000,000): what the limits cost when in force, not what they hold back.
 */
export const UNREACHED_GLOBAL_LIMITS: Required<Pick<OursVariant, 'globalRateLimit' | 'globalConcurrency'>> = {
  globalRateLimit: { max: 2_000_000_000, durationMs: 1_000 },
  globalConcurrency: 1_000_000,
};

export const SLOW: readonly SystemId[] = ['bullmq-per-id', 'groupmq'];

/** `n` for fast systems, `n * slowShare` (at least 1) for the per-id ones. */
export const scaled = (config: Config, system: SystemId, n: number): number =>
  SLOW.includes(system) ? Math.max(1, Math.round(n * config.slowShare)) : n;

const light = (keys: number, idsPerPush: number, windowMs: number, pushesPerKey: number): LightPlan => ({
  keys,
  idsPerPush,
  pushesPerKey,
  windowMs,
  seed: 42,
});

/** The oversubscribed run: 16 heavy keys, 5 ms of handler CPU per 100-id slice, 4 worker slots. */
const CONTENDED_HEAVY_KEYS = 16;

/** What differs between the modes; everything else (key counts, concurrency, handler cost) is the same in both. */
interface Sizes {
  /** Ids per key of the 100-key backlogs (drain, enqueue, memory, scale-out). */
  idsPerKey: number;
  floodIds: number;
  idsPerHeavyKey: number;
  /** Keys the split flood spreads the oversubscribed run's heavy ids over. */
  splitKeys: number;
  lightWindowMs: number;
  lightPushesPerKey: number;
  /** Past the light window, so the throughput covers the light keys' whole contended stretch. */
  contendedWindowMs: number;
  repeats: { drain: number; enqueue: number; scaleOut: number };
  scaleOutSystems: SystemId[];
  scaleOutProcesses: number[];
  profile: { keys: number; idsPerKey: number };
  timeoutMs: number;
  smallKeys: KeyShape[];
  oneIdKeys: number;
  /** Deadline of one one-id-keys run (fill and drain each). */
  oneIdTimeoutMs: number;
  stream: { ratesPerSec: number[]; durationMs: number; fifoRow: boolean };
  waitToFill: { ratesPerSec: number[]; durationMs: number };
  cycleKeys: number;
  /** How long cycle-cost watches the idle worker before the pushes. */
  cycleIdleMs: number;
  /** Calls per script of script-micro. */
  scriptCalls: number;
  /** Pushes per variant of push-tracing, and its runs per variant. */
  pushTracing: { pushes: number; repeats: number };
  controllerJump: { warmMs: number; jumpMs: number; steadyMs: number };
  rateLimit: {
    limitedIds: number;
    /** Per unlimited key: more than the 2 processes drain in the warm-up and the window (about 0.8M ids/s on 2 cores). */
    idsPerKey: number;
    warmupMs: number;
    windowMs: number;
    lightPushesPerKey: number;
    /** Per key of the retryAfter runs: more than the slots work through in their window (about 0.2M ids/s). */
    retryIdsPerKey: number;
    retryingIds: number;
    retryWindowMs: number;
    costIdsPerKey: number;
    timeoutMs: number;
  };
  /**
   * Keys with ids while history is sampled (what a sample's stats() reads), the intervals watched
   * and their length: the samplers share the bench's one event loop, so an interval must outlast a
   * stats() read of the keys, or their timers fall behind (a process of its own would not).
   */
  history: { keys: number; intervals: number; intervalMs: number };
  clusterShards: { keys: number; streamMs: number; idleMs: number; lightPushes: number };
}

function configFor(mode: Mode, s: Sizes): Config {
  const backlog = { keys: 100, idsPerKey: s.idsPerKey, concurrency: 16, timeoutMs: s.timeoutMs };
  const contended = (heavyKeys: number, idsPerHeavyKey: number): Contended => ({
    heavyKeys,
    idsPerHeavyKey,
    concurrency: 4,
    costPerIdUs: 50,
    light: light(30, 10, s.lightWindowMs, s.lightPushesPerKey),
    windowMs: s.contendedWindowMs,
    // fifo runs its light keys only after the whole backlog: the run is a full drain.
    timeoutMs: s.timeoutMs * 2,
  });
  const heavyIds = CONTENDED_HEAVY_KEYS * s.idsPerHeavyKey;
  return {
    mode,
    slowShare: 0.05,
    drain: { ...backlog, repeats: s.repeats.drain },
    enqueue: { keys: 100, idsPerKey: s.idsPerKey, callSize: 1000, callers: [1, 8], repeats: s.repeats.enqueue, timeoutMs: s.timeoutMs },
    noisy: {
      floodIds: s.floodIds,
      concurrency: 8,
      costPerIdUs: 10,
      light: light(50, 20, s.lightWindowMs, s.lightPushesPerKey),
      timeoutMs: s.timeoutMs * 1.5,
    },
    oversubscribed: contended(CONTENDED_HEAVY_KEYS, s.idsPerHeavyKey),
    splitFlood: contended(s.splitKeys, heavyIds / s.splitKeys),
    memory: backlog,
    scaleOut: { ...backlog, systems: s.scaleOutSystems, processes: s.scaleOutProcesses, repeats: s.repeats.scaleOut },
    profile: { ...s.profile, concurrency: 16, timeoutMs: s.timeoutMs },
    smallKeys: { shapes: s.smallKeys, concurrency: 16, fillCallers: 16, timeoutMs: s.timeoutMs },
    oneIdKeys: { keys: s.oneIdKeys, concurrency: 5, fillCallers: 16, timeoutMs: s.oneIdTimeoutMs },
    stream: { keys: 2_000, ...s.stream, concurrency: 16, keptUpMs: 2_000, maxInFlight: 2_000, seed: 7 },
    // The grace period outlasts the longest wait, so the stream's last ids can run.
    waitToFill: {
      keys: 1_000,
      ...s.waitToFill,
      maxWaitsMs: [100, 1_000],
      minSliceSize: 100,
      concurrency: 16,
      keptUpMs: 3_000,
      maxInFlight: 2_000,
      seed: 7,
    },
    cycleCost: { keys: s.cycleKeys, ratePerSec: 500, concurrency: 16, idleMs: s.cycleIdleMs, timeoutMs: s.timeoutMs },
    scriptMicro: { calls: s.scriptCalls, timeoutMs: s.timeoutMs },
    pushTracing: { ...s.pushTracing, keys: 100, idsPerPush: 10, callers: 16, timeoutMs: s.timeoutMs },
    controllerJump: { lowRate: 300, highRate: 3_000, ...s.controllerJump },
    rateLimit: flowPlan(s.rateLimit),
    // Intervals far shorter than the default 10 s, so the run takes seconds, not hours.
    history: { ...s.history, processes: 4, timeoutMs: s.timeoutMs },
    clusterShards: {
      ...s.clusterShards,
      shardCounts: [1, 2, 3],
      idsPerKey: 10,
      fillCallers: 16,
      concurrency: 8,
      streamRatePerSec: 1_000,
      heavyKeys: 16,
      idsPerHeavyKey: 2_000,
      heavyCostUs: 200,
      lightEveryMs: 20,
      timeoutMs: s.timeoutMs,
    },
  };
}

function flowPlan(s: Sizes['rateLimit']): FlowPlan {
  return {
    accuracy: {
      limit: { max: 1_000, durationMs: 1_000 },
      limitedIds: s.limitedIds,
      keys: 50,
      idsPerKey: s.idsPerKey,
      processes: 2,
      concurrency: 16,
      light: light(50, 20, s.windowMs, s.lightPushesPerKey),
      warmupMs: s.warmupMs,
      windowMs: s.windowMs,
      timeoutMs: s.timeoutMs,
    },
    retry: {
      keys: 20,
      idsPerKey: s.retryIdsPerKey,
      retryingIds: s.retryingIds,
      every: 10,
      retryAfterMs: 2_000,
      sliceWaitMs: 2,
      concurrency: 8,
      warmupMs: 500,
      windowMs: s.retryWindowMs,
      timeoutMs: s.timeoutMs,
    },
    // max is at most 2^31 - 1: two billion ids a second is a limit no drain reaches.
    cost: {
      keys: 100,
      idsPerKey: s.costIdsPerKey,
      concurrency: 16,
      sliceSize: DEFAULTS.sliceSize,
      limit: { max: 2_000_000_000, durationMs: 1_000 },
      timeoutMs: s.timeoutMs,
    },
  };
}

export const CONFIGS: Record<Mode, Config> = {
  // About 7.5 minutes on 2 cores for the first eight scenarios (the repeats and the fifo runs, full
  // drains, cost most), under 4 for the small-keys ones (one-id-keys and stream cost most) and
  // about 70 s for rate-limit (pushing the unlimited keys' backlogs costs most).
  full: configFor('full', {
    idsPerKey: 10_000,
    floodIds: 500_000,
    idsPerHeavyKey: 50_000,
    splitKeys: 1_000,
    lightWindowMs: 3_000,
    lightPushesPerKey: 3,
    contendedWindowMs: 4_000,
    repeats: { drain: 5, enqueue: 3, scaleOut: 3 },
    // The per-id systems are left out: with 4 processes, 3 runs each of 4 systems outgrow the
    // scenario's 5 minutes; their drain rates are in the drain scenario.
    scaleOutSystems: ['ours', 'bullmq-chunks'],
    scaleOutProcesses: [1, 2, 4],
    profile: { keys: 100, idsPerKey: 1_000 },
    timeoutMs: 60_000,
    smallKeys: [
      { keys: 10_000, idsPerKey: 10 },
      { keys: 2_000, idsPerKey: 50 },
    ],
    oneIdKeys: 100_000,
    // Ours drained its 100,000 keys in 57 s before the hot-path rewrite.
    oneIdTimeoutMs: 90_000,
    stream: { ratesPerSec: [2_000, 5_000, 20_000], durationMs: 10_000, fifoRow: true },
    waitToFill: { ratesPerSec: [2_000, 5_000], durationMs: 10_000 },
    cycleKeys: 2_000,
    cycleIdleMs: 1_000,
    scriptCalls: 5_000,
    pushTracing: { pushes: 50_000, repeats: 3 },
    controllerJump: { warmMs: 4_000, jumpMs: 4_000, steadyMs: 4_000 },
    rateLimit: {
      limitedIds: 500_000,
      idsPerKey: 300_000,
      warmupMs: 2_000,
      windowMs: 10_000,
      lightPushesPerKey: 3,
      retryIdsPerKey: 100_000,
      retryingIds: 3_000,
      retryWindowMs: 5_000,
      costIdsPerKey: 10_000,
      timeoutMs: 30_000,
    },
    history: { keys: 1_000, intervals: 20, intervalMs: 500 },
    clusterShards: { keys: 5_000, streamMs: 3_000, idleMs: 12_000, lightPushes: 100 },
  }),
  // Every scenario and system, small, for CI: about 110 s, of which about 25 s for the small-keys
  // scenarios (small-keys, one-id-keys, stream, cycle-cost) and about 35 s for rate-limit.
  quick: configFor('quick', {
    idsPerKey: 500,
    floodIds: 20_000,
    // 1.6 s of handler CPU: more than the window, so the window measures a busy worker.
    idsPerHeavyKey: 2_000,
    splitKeys: 200,
    lightWindowMs: 300,
    lightPushesPerKey: 1,
    contendedWindowMs: 600,
    repeats: { drain: 1, enqueue: 1, scaleOut: 1 },
    scaleOutSystems: ['ours'],
    scaleOutProcesses: [1, 2, 4],
    profile: { keys: 20, idsPerKey: 500 },
    timeoutMs: 20_000,
    smallKeys: [
      { keys: 1_000, idsPerKey: 10 },
      { keys: 200, idsPerKey: 50 },
    ],
    oneIdKeys: 3_000,
    oneIdTimeoutMs: 20_000,
    stream: { ratesPerSec: [500, 2_000], durationMs: 1_500, fifoRow: false },
    waitToFill: { ratesPerSec: [2_000], durationMs: 1_500 },
    cycleKeys: 300,
    cycleIdleMs: 250,
    scriptCalls: 500,
    pushTracing: { pushes: 2_000, repeats: 1 },
    controllerJump: { warmMs: 1_000, jumpMs: 1_500, steadyMs: 1_000 },
    rateLimit: {
      limitedIds: 50_000,
      idsPerKey: 120_000,
      warmupMs: 1_000,
      windowMs: 5_000,
      lightPushesPerKey: 2,
      retryIdsPerKey: 50_000,
      retryingIds: 2_000,
      retryWindowMs: 3_000,
      costIdsPerKey: 2_000,
      timeoutMs: 20_000,
    },
    history: { keys: 100, intervals: 20, intervalMs: 100 },
    clusterShards: { keys: 500, streamMs: 500, idleMs: 1_000, lightPushes: 10 },
  }),
};
