import { TICK_MS } from '../lib/pace';
import { keptUpRule, runStream, type StreamRun } from '../lib/stream';
import { ratio } from '../lib/stats';
import { systemFor, type SystemSpec } from '../systems';
import { fmtInt, progress } from './common';
import type { Cell, Ratio, Scenario } from './types';

const OURS: SystemSpec = { id: 'ours' };
const FIFO: SystemSpec = { id: 'ours', variant: { scheduling: 'fifo' } };
const BULLMQ: SystemSpec = { id: 'bullmq-per-id' };

const ms = (value: number) => value.toLocaleString('en-US', { minimumFractionDigits: 1, maximumFractionDigits: 1 });

/** A latency figure, marked "≥" where ids still unprocessed at the stop could push it up. */
function bounded(r: StreamRun, value: number, isMax = false): Cell {
  if (!Number.isFinite(value)) return null;
  return (isMax ? r.censored : value > r.minCensoredMs) ? `≥ ${ms(value)}` : value;
}

/** ours-like p99 over bullmq p99: a lower bound if ours is censored, unknown if bullmq is. */
function p99Ratio(rate: number, a: StreamRun | undefined, b: StreamRun | undefined): Ratio {
  const lower = a !== undefined && a.latency.p99 > a.minCensoredMs;
  const unknown = b === undefined || b.latency.p99 > b.minCensoredMs;
  const name =
    `${fmtInt(rate)}/s: ${a?.system ?? 'ours'} p99 / ${b?.system ?? 'bullmq-per-id'} ` +
    `p99${lower ? ' (at least: ours had ids left unprocessed)' : ''}`;
  const value = unknown ? null : ratio(a?.latency.p99, b?.latency.p99);
  if (b?.keptUp === 'yes' && a?.system === 'ours') return { name, value, target: '<= 2' };
  return { name: a?.system === 'ours' ? `${name} (no target: bullmq-per-id did not keep up)` : name, value };
}

/**
 * Many accounts pushing small and often: single-id pushes to random keys at a steady rate, the
 * worker processing as they come. Push-to-processed latency per id, and whether each system keeps up.
 */
export const stream: Scenario = {
  id: 'stream',
  async run(config) {
    const c = config.stream;
    const runs: StreamRun[] = [];
    const systems = c.fifoRow ? [OURS, FIFO, BULLMQ] : [OURS, BULLMQ];
    for (const rate of c.ratesPerSec) {
      for (const spec of systems) {
        progress(`${systemFor(spec).label}: ${fmtInt(rate)} pushes/s for ${(c.durationMs / 1000).toFixed(1)} s`);
        const run = await runStream(spec, c, rate);
        if (!run.pusherReached)
          progress(`${run.system}: the pusher reached only ${fmtInt(run.achievedPerSec)} pushes/s of ${fmtInt(rate)}`);
        runs.push(run);
      }
    }
    const find = (rate: number, label: string) => runs.find((r) => r.targetPerSec === rate && r.system === label);
    return {
      id: 'stream',
      title: 'Stream of single-id pushes',
      setup:
        `Single-id pushes to random keys out of ${fmtInt(c.keys)} (same seeded sequence for every system) at ` +
        `${c.ratesPerSec.map(fmtInt).join(', ')} pushes/s for ${(c.durationMs / 1000).toFixed(1)} s; ` +
        `each push its own performBatchLater / Queue.add call, sent every ${TICK_MS} ms as they come due, at most ` +
        `${fmtInt(c.maxInFlight)} in flight, from the bench process; ` +
        `1 worker process, concurrency ${c.concurrency}, empty handler. Latency: from the start of the push call to the handler call ` +
        `that processed the id. ` +
        `The run stops ${fmtInt(c.keptUpMs)} ms after the stream's end; an id still unprocessed counts with its wait so far, so a ` +
        `figure marked ≥ is a lower bound. ` +
        keptUpRule(c.keptUpMs),
      columns: [
        { key: 'rate', label: 'pushes/s' },
        { key: 'system', label: 'system' },
        { key: 'sent', label: 'sent/s' },
        { key: 'done', label: 'ids processed' },
        { key: 'p50', label: 'p50 ms', digits: 1 },
        { key: 'p99', label: 'p99 ms', digits: 1 },
        { key: 'max', label: 'max ms', digits: 1 },
        { key: 'thirds', label: 'p99 first → last third ms' },
        { key: 'pushP99', label: 'push call p99 ms', digits: 1 },
        { key: 'workerCpu', label: 'worker CPU µs/id', digits: 1 },
        { key: 'redisCpu', label: 'Redis CPU µs/id', digits: 1 },
        { key: 'keptUp', label: 'kept up' },
      ],
      rows: runs.map((r) => ({
        rate: r.targetPerSec,
        system: r.system,
        sent: r.pusherReached ? r.achievedPerSec : `${fmtInt(r.achievedPerSec)} (pusher short)`,
        done: `${fmtInt(r.processed)}/${fmtInt(r.pushed)}`,
        p50: bounded(r, r.latency.p50),
        p99: bounded(r, r.latency.p99),
        max: bounded(r, r.latency.max, true),
        thirds: `${ms(r.p99FirstThird)} → ${r.p99LastThird > r.minCensoredMs ? '≥ ' : ''}${ms(r.p99LastThird)}`,
        pushP99: r.pushCallP99Ms,
        workerCpu: r.workerCpuUsPerId,
        redisCpu: r.redisCpuUsPerId,
        keptUp: r.keptUp === 'yes' ? 'yes' : `no (${r.keptUp})`,
      })),
      ratios: c.ratesPerSec.flatMap((rate) => [
        p99Ratio(rate, find(rate, 'ours'), find(rate, 'bullmq-per-id')),
        ...(c.fifoRow ? [p99Ratio(rate, find(rate, 'ours (fifo)'), find(rate, 'bullmq-per-id'))] : []),
      ]),
      notes: [
        'sent/s is what the pusher sent; "(pusher short)" marks a rate the bench process could not reach (under 98% of the planned ' +
          'pushes), so that row measured the lower rate: ' +
          `either its CPU was spent, or ${fmtInt(c.maxInFlight)} pushes were in flight (a system whose push calls slow down holds its ` +
          `own pusher back)`,
        "the pusher, the worker process and redis-server share the machine's cores",
      ],
      details: runs,
    };
  },
};
