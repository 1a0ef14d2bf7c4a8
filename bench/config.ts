import type { LightPlan } from './lib/light';
import type { SystemId } from './systems/types';

export type Mode = 'quick' | 'full';

/** Every size of every scenario, per mode. The full mode fits 10 minutes on a 2-core machine. */
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
  oversubscribed: {
    heavyKeys: number;
    idsPerHeavyKey: number;
    concurrency: number;
    costPerIdUs: number;
    maxRuntimeMs: number;
    light: LightPlan;
    timeoutMs: number;
  };
  memory: { keys: number; idsPerKey: number; concurrency: number; timeoutMs: number };
  scaleOut: { systems: SystemId[]; processes: number[]; keys: number; idsPerKey: number; concurrency: number; repeats: number; timeoutMs: number };
  profile: { keys: number; idsPerKey: number; concurrency: number; timeoutMs: number };
}

/** The systems that add one BullMQ/groupmq job per id. */
export const SLOW: readonly SystemId[] = ['bullmq-per-id', 'groupmq'];

/** `n` for fast systems, `n * slowShare` (at least 1) for the per-id ones. */
export const scaled = (config: Config, system: SystemId, n: number): number =>
  SLOW.includes(system) ? Math.max(1, Math.round(n * config.slowShare)) : n;

const light = (windowMs: number, pushesPerKey: number): LightPlan => ({ keys: 50, idsPerPush: 20, pushesPerKey, windowMs, seed: 42 });

/** What differs between the modes; everything else (key counts, concurrency, handler cost) is the issue's. */
interface Sizes {
  /** Ids per key of the 100-key backlogs (drain, enqueue, memory, scale-out). */
  idsPerKey: number;
  floodIds: number;
  idsPerHeavyKey: number;
  lightWindowMs: number;
  lightPushesPerKey: number;
  repeats: { drain: number; enqueue: number; scaleOut: number };
  scaleOutSystems: SystemId[];
  profile: { keys: number; idsPerKey: number };
  timeoutMs: number;
}

function configFor(mode: Mode, s: Sizes): Config {
  const backlog = { keys: 100, idsPerKey: s.idsPerKey, concurrency: 16, timeoutMs: s.timeoutMs };
  const lightPlan = light(s.lightWindowMs, s.lightPushesPerKey);
  return {
    mode,
    slowShare: 0.05,
    drain: { ...backlog, repeats: s.repeats.drain },
    enqueue: { keys: 100, idsPerKey: s.idsPerKey, callSize: 1000, callers: [1, 8], repeats: s.repeats.enqueue, timeoutMs: s.timeoutMs },
    noisy: { floodIds: s.floodIds, concurrency: 8, costPerIdUs: 10, light: lightPlan, timeoutMs: s.timeoutMs * 1.5 },
    oversubscribed: {
      heavyKeys: 32,
      idsPerHeavyKey: s.idsPerHeavyKey,
      concurrency: 4,
      costPerIdUs: 10,
      maxRuntimeMs: 1000,
      light: lightPlan,
      timeoutMs: s.timeoutMs * 1.5,
    },
    memory: backlog,
    scaleOut: { ...backlog, systems: s.scaleOutSystems, processes: [1, 2], repeats: s.repeats.scaleOut },
    profile: { ...s.profile, concurrency: 16, timeoutMs: s.timeoutMs },
  };
}

export const CONFIGS: Record<Mode, Config> = {
  // About 7-8 minutes on 2 cores; the repeats are what costs most.
  full: configFor('full', {
    idsPerKey: 10_000,
    floodIds: 500_000,
    idsPerHeavyKey: 20_000,
    lightWindowMs: 3_000,
    lightPushesPerKey: 3,
    repeats: { drain: 5, enqueue: 3, scaleOut: 3 },
    scaleOutSystems: ['ours', 'bullmq-chunks', 'bullmq-per-id', 'groupmq'],
    profile: { keys: 100, idsPerKey: 1_000 },
    timeoutMs: 60_000,
  }),
  // Every scenario and system, small: under a minute, for CI.
  quick: configFor('quick', {
    idsPerKey: 500,
    floodIds: 20_000,
    idsPerHeavyKey: 500,
    lightWindowMs: 300,
    lightPushesPerKey: 1,
    repeats: { drain: 1, enqueue: 1, scaleOut: 1 },
    scaleOutSystems: ['ours'],
    profile: { keys: 20, idsPerKey: 500 },
    timeoutMs: 20_000,
  }),
};
