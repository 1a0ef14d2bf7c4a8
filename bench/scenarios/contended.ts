import type { Config, Contended } from '../config';
import { ratio } from '../lib/stats';
import type { WorkloadResult } from '../lib/workload';
import type { SystemSpec } from '../systems';
import { backlogFor, fmtInt, LATENCY_COLUMNS, latencyRow, runSystems } from './common';
import type { Column, Ratio } from './types';

/** Ours as shipped (fair) and as before fair scheduling (fifo: requeue by runtime budget alone). */
export const FAIR: SystemSpec = { id: 'ours' };
export const FIFO: SystemSpec = { id: 'ours', variant: { scheduling: 'fifo' } };

/** One run per system of a contended workload (see Contended): one worker process, windowed. */
export function runContended(config: Config, c: Contended, plan: readonly SystemSpec[]): Promise<WorkloadResult[]> {
  return runSystems(plan, (system) => ({
    system,
    processes: 1,
    concurrency: c.concurrency,
    costPerIdUs: c.costPerIdUs,
    backlog: backlogFor(config, system, c.heavyKeys, c.idsPerHeavyKey),
    light: c.light,
    windowMs: c.windowMs,
    timeoutMs: c.timeoutMs,
  }));
}

export function contendedSetup(c: Contended): string {
  const l = c.light;
  return (
    `${fmtInt(c.heavyKeys)} heavy keys × ${fmtInt(c.idsPerHeavyKey)} ids (backlog pushed first), handler ${c.costPerIdUs} µs of CPU ` +
    `per id ` +
    `(${(c.costPerIdUs * 100) / 1000} ms per 100-id slice or chunk), concurrency ${c.concurrency}, 1 worker process, default ` +
    `maxRuntimeMs; ` +
    `${l.keys} light keys each push ${l.idsPerPush} ids ${l.pushesPerKey}× at random moments (same seed for all) in the first ` +
    `${fmtInt(l.windowMs)} ms. ` +
    `Heavy ids/s: heavy ids processed in the first ${fmtInt(c.windowMs)} ms after the workers start. ` +
    'Each run stops once that window is over and every light id is processed, so the heavy backlog is not drained.'
  );
}

/** The latency columns, with the heavy rate after the backlog; a run ends with its window, not a drain. */
export const CONTENDED_COLUMNS: Column[] = [
  ...LATENCY_COLUMNS.slice(0, 2),
  { key: 'heavyRate', label: 'heavy ids/s in window' },
  ...LATENCY_COLUMNS.slice(2, -1),
  { key: 'seconds', label: 'run s', digits: 2 },
];

/** A run that drained its whole backlog inside the window was not busy all of it: no rate. */
const busyRate = (r: WorkloadResult): number | null => (r.window && r.window.heavyIds < r.backlogIds ? r.window.heavyIdsPerSec : null);

export function contendedRow(r: WorkloadResult): ReturnType<typeof latencyRow> {
  return { ...latencyRow(r), heavyRate: busyRate(r) };
}

export const DRAINED_NOTE = 'heavy ids/s is — where a system drained its whole (smaller) backlog inside the window';

/** Fair against fifo: light p99 and heavy throughput. */
export function fairVsFifo(fair: WorkloadResult | undefined, fifo: WorkloadResult | undefined, throughputTarget?: string): Ratio[] {
  return [
    { name: 'light p99: ours (fifo) / ours', value: ratio(fifo?.light?.p99, fair?.light?.p99) },
    {
      name: 'heavy ids/s in window: ours / ours (fifo)',
      value: ratio(fair && busyRate(fair), fifo && busyRate(fifo)),
      ...(throughputTarget ? { target: throughputTarget } : {}),
    },
  ];
}
