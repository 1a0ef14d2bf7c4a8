import { scaled, type Config } from '../config';
import { systemFor, type SystemSpec } from '../systems';
import { inRounds, medianBy } from '../lib/repeat';
import { runWorkload, type Workload, type WorkloadResult } from '../lib/workload';
import type { Cell, Column } from './types';

export const progress = (line: string): void => console.log(`  · ${line}`);

export const fmtInt = (n: number): string => Math.round(n).toLocaleString('en-US');

/** A system's result: its median run by ids/s, and the ids/s of every run. */
export type Measured = WorkloadResult & { runsIdsPerSec: number[] };

/**
 * Runs one workload per plan (usually a system), one at a time (in parallel they would share the 2
 * cores), `repeats` rounds, and keeps each plan's median run by ids/s.
 */
export async function runSystems<P>(plans: readonly P[], build: (plan: P) => Workload, repeats = 1): Promise<Measured[]> {
  const tasks = plans.map((plan) => async () => {
    const workload = build(plan);
    const label = systemFor(workload.system).label;
    progress(`${label}: ${fmtInt(workload.backlog.keys * workload.backlog.idsPerKey)} ids, ${workload.processes} process(es)`);
    const result = await runWorkload(workload);
    if (result.timedOut)
      progress(`${label}: TIMED OUT after ${workload.timeoutMs} ms with ${fmtInt(result.processed)}/${fmtInt(result.expected)} processed`);
    return result;
  });
  return (await inRounds(tasks, repeats)).map((runs) => ({
    ...medianBy(runs, (r) => r.idsPerSec),
    runsIdsPerSec: runs.map((r) => r.idsPerSec),
  }));
}

/** "min–max" of a system's runs, or the single figure. */
export function spread(values: readonly number[]): string {
  return values.length > 1 ? `${fmtInt(Math.min(...values))}–${fmtInt(Math.max(...values))}` : fmtInt(values[0] ?? Number.NaN);
}

/** A pushed backlog drained with an empty handler: the drain, memory, scale-out and profile runs. */
export function drainWorkload(
  config: Config,
  system: SystemSpec,
  c: { keys: number; idsPerKey: number; concurrency: number; timeoutMs: number },
  processes = 1,
): Workload {
  return {
    system,
    processes,
    concurrency: c.concurrency,
    costPerIdUs: 0,
    backlog: backlogFor(config, system, c.keys, c.idsPerKey),
    timeoutMs: c.timeoutMs,
  };
}

/** Splits `total` ids over `keys` keys for one system, scaled down for the per-id systems. */
export function backlogFor(config: Config, spec: SystemSpec, keys: number, idsPerKey: number): Workload['backlog'] {
  return { keys, idsPerKey: scaled(config, spec.id, idsPerKey) };
}

export function slowNote(config: Config): string {
  return (
    `bullmq-per-id and groupmq ran ${Math.round(config.slowShare * 100)}% of the ids (one job per id is ~100x slower); rates are ` +
    `per second and ratios compare rates`
  );
}

/** The per-run spread column means something only with repeats. */
export const forRepeats = (columns: readonly Column[], repeats: number): Column[] =>
  columns.filter((c) => c.key !== 'spread' || repeats > 1);

/** ", median of N runs" or nothing. */
export const medianOf = (repeats: number): string => (repeats > 1 ? `; median of ${repeats} runs per system, run in rounds` : '');

export const THROUGHPUT_COLUMNS: Column[] = [
  { key: 'system', label: 'system' },
  { key: 'ids', label: 'ids' },
  { key: 'seconds', label: 'drain s', digits: 2 },
  { key: 'idsPerSec', label: 'ids/s (median)' },
  { key: 'spread', label: 'ids/s of each run (min–max)' },
  { key: 'workerCpu', label: 'worker CPU µs/id', digits: 2 },
  { key: 'redisCpu', label: 'Redis CPU µs/id', digits: 2 },
];

export function throughputRow(r: Measured): Record<string, Cell> {
  return {
    system: r.timedOut ? `${r.system} (timed out)` : r.system,
    ids: r.processed,
    seconds: r.drainMs / 1000,
    idsPerSec: r.idsPerSec,
    spread: spread(r.runsIdsPerSec),
    workerCpu: r.workerCpuUsPerId,
    redisCpu: r.redisCpuUsPerId,
  };
}

/** The result of the plain system `label` (e.g. 'ours'), for ratios. */
export function byLabel(results: readonly WorkloadResult[], label: string): WorkloadResult | undefined {
  return results.find((r) => r.system === label && !r.timedOut);
}

export const LATENCY_COLUMNS: Column[] = [
  { key: 'system', label: 'system' },
  { key: 'backlog', label: 'heavy ids' },
  { key: 'p50', label: 'light p50 ms', digits: 1 },
  { key: 'p99', label: 'light p99 ms', digits: 1 },
  { key: 'max', label: 'light max ms', digits: 1 },
  { key: 'lightDone', label: 'light ids done' },
  { key: 'seconds', label: 'all done s', digits: 2 },
];

export function latencyRow(r: WorkloadResult): Record<string, Cell> {
  const light = r.light;
  return {
    system: r.timedOut ? `${r.system} (timed out)` : r.system,
    backlog: r.backlogIds,
    p50: light?.p50 ?? null,
    p99: light?.p99 ?? null,
    max: light?.max ?? null,
    lightDone: light ? `${fmtInt(light.pushed - light.missing)}/${fmtInt(light.pushed)}` : null,
    seconds: r.drainMs / 1000,
  };
}

/** p99 of every other row over p99 of `base`: how many times longer a light key waits there. */
export function p99Ratios(results: readonly WorkloadResult[], base: WorkloadResult | undefined): { name: string; value: number | null }[] {
  return results
    .filter((r) => r !== base)
    .map((r) => ({
      name: `light p99: ${r.system} (${fmtInt(r.backlogIds)} heavy ids) / ${base?.system ?? 'ours'}`,
      value: r.timedOut ? null : ratioOf(r.light?.p99, base?.light?.p99),
    }));
}

function ratioOf(a: number | undefined, b: number | undefined): number | null {
  return a === undefined || b === undefined || !Number.isFinite(a) || !Number.isFinite(b) || b === 0 ? null : a / b;
}
