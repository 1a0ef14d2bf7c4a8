import type { Config } from '../config';
import { systemFor, type SystemSpec } from '../systems';
import { WorkerPool } from '../worker/host';
import { now, sleep, withTimeout } from './clock';
import { readCommandStats, resetCommandStats, SCRIPTS, type CommandStat } from './commandstats';
import { newTarget } from './fill';
import { pace } from './pace';
import { withFreshRedis } from './redis';
import { readSentCalls, startSlowlog } from './slowlog';

/** Cycle keys carry this prefix: the worker reports each of their ids, so the run waits for distinct ids. */
const CYCLE_PREFIX = 'cycle-';
/** After the workers start, before anything is measured (connections, first blocking calls). */
const SETTLE_MS = 300;
/** Key cycles of the logged pass, at most: SLOWLOG logs the commands scripts run too, and holds 200,000 entries. */
const LOGGED_CYCLES = 500;
/** Pushes in flight at most; at a few hundred per second there are a handful. */
const MAX_IN_FLIGHT = 100;

export interface CycleCost {
  system: string;
  cycles: number;
  ms: number;
  /** Every command Redis executed (INFO commandstats calls), those that scripts and MULTI/EXEC ran included. */
  commands: number;
  /** Commands clients sent (the logged pass): each script call once, EXEC not counted, the commands in a MULTI each once. */
  sentCommands: number;
  /** EVAL, EVALSHA, FCALL (and their _RO forms). */
  scriptCalls: number;
  /**
   * Redis execution time of the commands clients sent, each once: INFO commandstats usec of every
   * script call (its inner commands included), plus of other commands the share clients sent
   * (the rest ran inside scripts, already in the script's usec); EXEC left out (its commands are in).
   */
  usec: number;
  /** redis-server CPU (INFO cpu, user + system) over the clean pass: execution, networking, everything. */
  redisCpuUs: number;
  /** Commands Redis executed per second while the worker idled, before the pushes. */
  idleCommandsPerSec: number;
  /** Per script name (the logged pass), calls per cycle. */
  scripts: Record<string, number>;
  /** INFO commandstats of the clean pass, totals (not per cycle). */
  commandstats: CommandStat[];
  timedOut: boolean;
  slowlogTruncated: boolean;
}

/** Figures per key cycle, for the table. */
export const perCycle = (c: CycleCost, total: number): number => total / Math.max(1, c.cycles);

/**
 * Paced pushes of one id to a fresh key each (keys and ids `first`, `first + 1`, ...), then waits
 * until each is processed: every earlier pass's ids too, as the pool counts distinct ids.
 */
async function cycles(
  pool: WorkerPool,
  push: (key: string, id: string) => Promise<void>,
  first: number,
  count: number,
  ratePerSec: number,
  timeoutMs: number,
): Promise<{ done: boolean; ms: number }> {
  const startAt = now();
  const paced = await pace({ ratePerSec, count, maxInFlight: MAX_IN_FLIGHT, startAt }, (seq) =>
    push(`${CYCLE_PREFIX}${first + seq}`, String(first + seq)),
  );
  const done = (await paced.settled(timeoutMs)) && (await pool.waitLight(first + count, timeoutMs));
  return { done: done && paced.failed.size === 0, ms: now() - startAt };
}

/**
 * The Redis cost of one key cycle (push one id to a new key, then its run), for one system: one
 * worker process idles, then `keys` cycles are paced at `ratePerSec` (so cycles rarely overlap and
 * every key is a new one) with INFO commandstats reset before and read after. Then a shorter pass
 * with SLOWLOG on tells which commands clients sent, so the usec of commands that scripts ran is
 * not counted twice (INFO counts it in the script's usec and again on the inner command's line).
 */
export async function runCycleCost(spec: SystemSpec, c: Config['cycleCost']): Promise<CycleCost> {
  const system = systemFor(spec);
  return withFreshRedis(async (redis) => {
    const target = newTarget(redis);
    const producer = await system.producer(target);
    let pool: WorkerPool | undefined;
    try {
      pool = await WorkerPool.fork(1, { system: spec, target, concurrency: c.concurrency, costPerIdUs: 0, lightPrefix: CYCLE_PREFIX });
      const push = (key: string, id: string) => producer.push(key, [id]);
      await sleep(pool.start() + SETTLE_MS - now());

      await resetCommandStats(redis);
      await sleep(c.idleMs);
      const idle = await readCommandStats(redis);

      await resetCommandStats(redis);
      const cpuBefore = await redis.cpuMicros();
      const clean = await cycles(pool, push, 0, c.keys, c.ratePerSec, c.timeoutMs);
      const redisCpuUs = (await redis.cpuMicros()) - cpuBefore;
      const stats = await readCommandStats(redis);

      const logged = Math.min(c.keys, LOGGED_CYCLES);
      await startSlowlog(redis);
      const loggedRun = await cycles(pool, push, c.keys, logged, c.ratePerSec, c.timeoutMs);
      const sent = await readSentCalls(redis);

      const sentPerCycle = (command: string) => (sent.byCommand.get(command) ?? 0) / logged;
      let usec = 0;
      for (const s of stats) {
        if (s.command === 'exec') continue;
        const share = SCRIPTS.has(s.command) || s.calls === 0 ? 1 : Math.min(1, sentPerCycle(s.command) / (s.calls / c.keys));
        usec += s.usec * share;
      }
      const sum = (filter: (s: CommandStat) => boolean) => stats.filter(filter).reduce((n, s) => n + s.calls, 0);
      const running = pool;
      pool = undefined;
      await running.stop();
      return {
        system: system.label,
        cycles: c.keys,
        ms: clean.ms,
        commands: sum(() => true),
        sentCommands: ([...sent.byCommand.values()].reduce((n, v) => n + v, 0) * c.keys) / logged,
        scriptCalls: sum((s) => SCRIPTS.has(s.command)),
        usec,
        redisCpuUs,
        idleCommandsPerSec: (idle.reduce((n, s) => n + s.calls, 0) * 1000) / c.idleMs,
        scripts: Object.fromEntries([...sent.byScript].sort((a, b) => b[1] - a[1]).map(([name, calls]) => [name, calls / logged])),
        commandstats: stats,
        timedOut: !clean.done || !loggedRun.done,
        slowlogTruncated: sent.truncated,
      };
    } finally {
      await pool?.stop().catch(() => undefined);
      await withTimeout(producer.close(), 10_000, `${system.label} producer close`);
    }
  });
}
