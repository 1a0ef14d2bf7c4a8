import { DEFAULTS } from '../../src';
import { Keyspace } from '../../src/storage/keys';
import { systemFor, type SystemSpec } from '../systems';
import type { Target } from '../systems/types';
import { WorkerPool } from '../worker/host';
import type { TracedSlice } from '../worker/protocol';
import { now, sleep, withTimeout } from './clock';
import { measuredFill, newTarget } from './fill';
import { LIGHT_PREFIX, LightPusher, type LightPlan, type LightResult } from './light';
import { backlogCalls, keyNames, type Call } from './push';
import { withFreshRedis, type BenchRedis } from './redis';
import { perSecond } from './stats';

/** Calls that fill a backlog: performBatchLater-sized; more callers than workload.ts, as these backlogs are bigger. */
const FILL_CALL_SIZE = 1000;
const FILL_CALLERS = 8;

/** `keys` keys named `${prefix}000`, `${prefix}001`, ..., each with `idsPerKey` ids, pushed before the workers start. */
export interface Backlog {
  prefix: string;
  keys: number;
  idsPerKey: number;
}

/**
 * A run of ours with flow control on some keys (the traced ones: rate limited, or calling
 * retryAfter) beside other keys with backlogs that keep every worker slot busy. The figures come
 * from a window after a warm-up, so the start (every key's first claims at once, and a limited
 * key's first window, which has all its room) is left out.
 */
export interface FlowWorkload {
  system: SystemSpec;
  processes: number;
  /** Per worker process. */
  concurrency: number;
  /** Handler time per call (see WorkerSpec.sliceWaitMs); unset: an empty handler. */
  sliceWaitMs?: number;
  /** The other keys: their throughput in the window is what flow control must not take away. */
  others: Backlog;
  /** The keys whose every handler call is traced (see WorkerSpec.tracePrefix). */
  traced?: Backlog;
  /** Light keys pushing during the window (pushes spread over `light.windowMs` from its start). */
  light?: LightPlan;
  warmupMs: number;
  windowMs: number;
  /** Follow the first traced key's rate-limit log, so every claim is known by the Redis clock. */
  claimLog?: boolean;
  /** After the window, also wait until every traced id is processed. */
  drainTraced?: boolean;
  /** Bounds the fill, and the waits after the window (light ids, traced ids). */
  timeoutMs: number;
}

/** A claim of a rate-limited key as its log records it: [claimed at (Redis clock, ms), ids]. */
export type Claim = [number, number];

export interface FlowResult {
  system: string;
  othersIds: number;
  tracedIds: number;
  /** Epoch ms (see clock.ts now()) of the workers' start, and of the measurement window. */
  startAt: number;
  window: {
    from: number;
    to: number;
    /** Ids of the other keys processed in the window. */
    othersIds: number;
    othersIdsPerSec: number;
    /** The other keys ran out of ids before the window ended: their rate is too low. */
    othersDrained: boolean;
    /** Time in handler calls over slot time (slots × window), every key's calls counted. */
    utilisation: number;
  };
  /** Every handler call of a traced key, by start time. */
  slices: TracedSlice[];
  /** Traced ids processed by the end of the run (a redelivered id counted again), and when the last one was, from the start. */
  tracedDone: { ids: number; lastMs: number };
  /**
   * With `claimLog`: every claim of the first traced key, oldest first; `maxPollGapMs` above the
   * limit's window means some may be missing.
   */
  claims?: { entries: Claim[]; maxPollGapMs: number };
  light?: LightResult;
  /** A wait after the window (light ids, traced ids) ran out of time. */
  timedOut: boolean;
}

function* calls(backlogs: readonly Backlog[]): Generator<Call> {
  for (const b of backlogs) yield* backlogCalls(keyNames(b.prefix, b.keys), b.idsPerKey, FILL_CALL_SIZE);
}

/**
 * Follows a key's rate-limit log (a list of `claimMs count`, see src/scripts/includes/flow.lua) by
 * reading it again and again: claims only ever join its tail (a new entry, or the tail entry
 * grown: claims close together share one, restamped), and leave its head once a window old, so
 * polling well within the window sees every claim once.
 */
class ClaimLogReader {
  readonly entries: Claim[] = [];
  maxPollGapMs = 0;
  private last: string[] = [];
  private lastPollAt: number | undefined;
  private stopped = false;
  private loop: Promise<void> = Promise.resolve();
  /** A read that failed stops the reader; `stop` rethrows it (a rejected loop nobody awaits yet would crash the bench). */
  private failure: { error: unknown } | undefined;

  constructor(
    private readonly redis: BenchRedis,
    private readonly name: string,
    private readonly everyMs: number,
  ) {}

  start(): void {
    this.loop = (async () => {
      try {
        while (!this.stopped) {
          await this.poll();
          await sleep(this.everyMs);
        }
      } catch (error) {
        this.failure = { error };
      }
    })();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    await withTimeout(this.loop, 5_000, 'claim log reader');
    if (this.failure) throw this.failure.error;
    await this.poll();
  }

  private async poll(): Promise<void> {
    const at = now();
    const current = await this.redis.admin.lrange(this.name, 0, -1);
    if (this.lastPollAt !== undefined) this.maxPollGapMs = Math.max(this.maxPollGapMs, at - this.lastPollAt);
    this.lastPollAt = at;
    // The oldest entries of the last read may have gone; the rest start this read. Entries that
    // look alike (same ms and count) are of one instant, so they leave together: the first
    // alignment is the right one.
    // The last entry read may have grown since (a later claim joined it): it is replaced.
    let kept = 0;
    for (let drop = 0; drop <= this.last.length; drop++) {
      const rest = this.last.slice(drop);
      const grown = (i: number) => i === rest.length - 1 && current[i] !== undefined && grewFrom(rest[i]!, current[i]);
      if (rest.length <= current.length && rest.every((entry, i) => entry === current[i] || grown(i))) {
        kept = rest.length;
        if (kept > 0 && rest[kept - 1] !== current[kept - 1]) {
          this.entries.pop();
          kept -= 1;
        }
        break;
      }
    }
    for (const entry of current.slice(kept)) {
      const [ms, ids] = entry.split(' ').map(Number);
      this.entries.push([ms!, ids!]);
    }
    this.last = current;
  }
}

/** An entry that later claims joined: restamped no earlier, with more ids. */
function grewFrom(before: string, after: string): boolean {
  const [ms0, n0] = before.split(' ').map(Number);
  const [ms1, n1] = after.split(' ').map(Number);
  return ms1! >= ms0! && n1! > n0!;
}

/** The rate-limit log of `key` in the target's batcher (src/keys.ts). */
function rateLogOf(target: Target, key: string): string {
  return new Keyspace(DEFAULTS.prefix, target.namespace).forKey(key).rateLog;
}

/** Ids processed by the other keys so far: progress messages carry every count together, so the difference is theirs. */
const othersProcessed = (pool: WorkerPool) => pool.processed - pool.light.length - pool.tracedIds;

export async function runFlow(w: FlowWorkload): Promise<FlowResult> {
  const system = systemFor(w.system);
  return withFreshRedis(async (redis) => {
    const target = newTarget(redis);
    const producer = await system.producer(target);
    let pool: WorkerPool | undefined;
    let light: LightPusher | undefined;
    let claims: ClaimLogReader | undefined;
    try {
      const othersIds = w.others.keys * w.others.idsPerKey;
      const tracedIds = w.traced ? w.traced.keys * w.traced.idsPerKey : 0;
      // The traced keys first: their jobs are the first in line, so they run from the start, not once a slot frees.
      await measuredFill(redis, producer, calls(w.traced ? [w.traced, w.others] : [w.others]), FILL_CALLERS, w.timeoutMs, system.label);
      pool = await WorkerPool.fork(w.processes, {
        system: w.system,
        target,
        concurrency: w.concurrency,
        costPerIdUs: 0,
        lightPrefix: LIGHT_PREFIX,
        ...(w.traced && { tracePrefix: w.traced.prefix }),
        ...(w.sliceWaitMs && { sliceWaitMs: w.sliceWaitMs }),
      });
      if (w.claimLog && w.traced) {
        claims = new ClaimLogReader(redis, rateLogOf(target, keyNames(w.traced.prefix, 1)[0]!), 100);
        claims.start();
      }
      const startAt = pool.start();

      await sleep(startAt + w.warmupMs - now());
      const from = now();
      const [othersFrom, busyFrom] = [othersProcessed(pool), pool.busyMs];
      if (w.light) {
        light = new LightPusher(w.light, producer);
        light.start();
      }
      await sleep(from + w.windowMs - now());
      const to = now();
      const [othersTo, busyTo] = [othersProcessed(pool), pool.busyMs];

      const deadline = to + w.timeoutMs;
      let done = true;
      // Every light push was scheduled inside the window; one that failed leaves its ids missing, and the wait times out.
      if (light) done = await pool.waitLight(light.total, deadline - now());
      if (w.drainTraced) done = (await pool.waitTraced(tracedIds, Math.max(0, deadline - now()))) && done;
      const reader = claims;
      claims = undefined;
      await reader?.stop();
      light?.cancel();
      const running = pool;
      pool = undefined;
      await running.stop();

      const slices = [...running.traced].sort((a, b) => a[2] - b[2]);
      return {
        system: system.label,
        othersIds,
        tracedIds,
        startAt,
        window: {
          from,
          to,
          othersIds: othersTo - othersFrom,
          othersIdsPerSec: perSecond(othersTo - othersFrom, to - from),
          othersDrained: othersTo >= othersIds,
          utilisation: (busyTo - busyFrom) / (w.processes * w.concurrency * (to - from)),
        },
        slices,
        tracedDone: { ids: running.tracedIds, lastMs: Math.max(0, ...slices.map((s) => s[3])) - startAt },
        ...(reader && { claims: { entries: reader.entries, maxPollGapMs: reader.maxPollGapMs } }),
        ...(light && { light: light.result(running.light) }),
        timedOut: !done,
      };
    } finally {
      light?.cancel();
      await claims?.stop().catch(() => undefined);
      await pool?.stop().catch(() => undefined);
      await withTimeout(producer.close(), 10_000, `${system.label} producer close`);
    }
  });
}

/** The most ids in any window [t, t + durationMs) of `events` ([at, ids], any order). */
export function busiestWindow(events: readonly (readonly [number, number])[], durationMs: number): number {
  const sorted = [...events].sort((a, b) => a[0] - b[0]);
  let best = 0;
  let sum = 0;
  let tail = 0;
  for (const [at, ids] of sorted) {
    sum += ids;
    while (sorted[tail]![0] <= at - durationMs) sum -= sorted[tail++]![1];
    best = Math.max(best, sum);
  }
  return best;
}

/** Ids of the traced calls that started in [from, to). */
export const idsStartedIn = (slices: readonly TracedSlice[], from: number, to: number): number =>
  slices.reduce((n, [, ids, startedAt]) => (startedAt >= from && startedAt < to ? n + ids : n), 0);

/**
 * Ids/s of the traced calls over [from, to), each call's ids spread evenly over the `spreadMs`
 * after it started (the window a rate limit counts them in). A limited key with an empty handler
 * runs in bursts of a whole window's ids, a window apart: counted as points, the edges of
 * [from, to) falling just before or just after a burst would move the rate by max / (to - from)
 * (10% over 10 s at 1,000 ids per second); spread, the bursts tile the window and cannot.
 */
export function spreadRate(slices: readonly TracedSlice[], from: number, to: number, spreadMs: number): number {
  let ids = 0;
  for (const [, n, startedAt] of slices) {
    const overlap = Math.min(to, startedAt + spreadMs) - Math.max(from, startedAt);
    if (overlap > 0) ids += (n * overlap) / spreadMs;
  }
  return perSecond(ids, to - from);
}
