import { TICK_MS } from '../lib/pace';
import { keptUpRule, runStream, type StreamRun } from '../lib/stream';
import { ratio } from '../lib/stats';
import { systemFor, type SystemSpec } from '../systems';
import { fmtInt, progress } from './common';
import type { Ratio, Scenario } from './types';

const BULLMQ: SystemSpec = { id: 'bullmq-per-id' };

/** The rate and wait the issue set its targets at (issue 32 §1). */
const TARGET = { ratePerSec: 5_000, maxWaitMs: 1_000, cheaper: 5, p99OverWaitMs: 250 };

const ms = (value: number) => value.toLocaleString('en-US', { minimumFractionDigits: 1, maximumFractionDigits: 1 });

/**
 * Wait to fill (`minSliceSize`, `maxWaitMs`) on the stream scenario's shape: single-id pushes to
 * random keys, so that without a wait every key runs slices of about one id. With one, a key's
 * ids gather for up to `maxWaitMs`: fewer runs, at the price of about that much latency.
 */
export const waitToFill: Scenario = {
  id: 'wait-to-fill',
  async run(config) {
    const c = config.waitToFill;
    const ours = c.maxWaitsMs.map((maxWaitMs): SystemSpec => ({ id: 'ours', variant: { maxWaitMs, minSliceSize: c.minSliceSize } }));
    const runs: { run: StreamRun; maxWaitMs: number | undefined }[] = [];
    for (const rate of c.ratesPerSec) {
      for (const spec of [BULLMQ, ...ours]) {
        progress(`${systemFor(spec).label}: ${fmtInt(rate)} pushes/s for ${(c.durationMs / 1000).toFixed(1)} s`);
        const run = await runStream(spec, c, rate);
        if (!run.pusherReached)
          progress(`${run.system}: the pusher reached only ${fmtInt(run.achievedPerSec)} pushes/s of ${fmtInt(rate)}`);
        runs.push({ run, maxWaitMs: spec.variant?.maxWaitMs });
      }
    }
    const find = (rate: number, maxWaitMs: number | undefined) =>
      runs.find((r) => r.run.targetPerSec === rate && r.maxWaitMs === maxWaitMs)?.run;
    const ratios: Ratio[] = c.ratesPerSec.flatMap((rate) =>
      c.maxWaitsMs.flatMap((maxWaitMs) => {
        const run = find(rate, maxWaitMs);
        const bullmq = find(rate, undefined);
        const targeted = rate === TARGET.ratePerSec && maxWaitMs === TARGET.maxWaitMs;
        return [
          {
            name: `${fmtInt(rate)}/s, maxWaitMs ${fmtInt(maxWaitMs)}: Redis CPU per id, bullmq-per-id / ours`,
            value: ratio(bullmq?.redisCpuUsPerId, run?.redisCpuUsPerId),
            ...(targeted && { target: `>= ${TARGET.cheaper}` }),
          },
          {
            name: `${fmtInt(rate)}/s, maxWaitMs ${fmtInt(maxWaitMs)}: worker CPU per id, bullmq-per-id / ours`,
            value: ratio(bullmq?.workerCpuUsPerId, run?.workerCpuUsPerId),
          },
          {
            name: `${fmtInt(rate)}/s, maxWaitMs ${fmtInt(maxWaitMs)}: ours p99 - maxWaitMs (ms)`,
            value: run && !run.censored ? run.latency.p99 - maxWaitMs : null,
            ...(targeted && { target: `<= ${TARGET.p99OverWaitMs}` }),
          },
        ];
      }),
    );
    return {
      id: 'wait-to-fill',
      title: 'Wait to fill: a stream of single-id pushes',
      setup:
        `Single-id pushes to random keys out of ${fmtInt(c.keys)} (same seeded sequence for every system) at ` +
        `${c.ratesPerSec.map(fmtInt).join(', ')} pushes/s for ${(c.durationMs / 1000).toFixed(1)} s; ours with minSliceSize ` +
        `${fmtInt(c.minSliceSize)} and maxWaitMs ${c.maxWaitsMs.map(fmtInt).join(' or ')}, beside one BullMQ job per id. Each push ` +
        `its own performBatchLater / Queue.add call, sent every ${TICK_MS} ms as they come due, at most ${fmtInt(c.maxInFlight)} in ` +
        `flight, from the bench process; 1 worker process, concurrency ${c.concurrency}, empty handler. Latency: from the start of ` +
        `the push call to the handler call that processed the id. Ids per slice: ids processed over handler calls. ` +
        `The run stops ${fmtInt(c.keptUpMs)} ms after the stream's end. ` +
        keptUpRule(c.keptUpMs),
      columns: [
        { key: 'rate', label: 'pushes/s' },
        { key: 'system', label: 'system' },
        { key: 'sent', label: 'sent/s' },
        { key: 'done', label: 'ids processed' },
        { key: 'perSlice', label: 'ids per slice', digits: 1 },
        { key: 'p50', label: 'p50 ms', digits: 1 },
        { key: 'p99', label: 'p99 ms', digits: 1 },
        { key: 'pushP99', label: 'push call p99 ms', digits: 1 },
        { key: 'workerCpu', label: 'worker CPU µs/id', digits: 1 },
        { key: 'redisCpu', label: 'Redis CPU µs/id', digits: 1 },
        { key: 'keptUp', label: 'kept up' },
      ],
      rows: runs.map(({ run: r }) => ({
        rate: r.targetPerSec,
        system: r.system,
        sent: r.pusherReached ? r.achievedPerSec : `${fmtInt(r.achievedPerSec)} (pusher short)`,
        done: `${fmtInt(r.processed)}/${fmtInt(r.pushed)}`,
        perSlice: r.idsPerSlice,
        p50: r.latency.p50 > r.minCensoredMs ? `≥ ${ms(r.latency.p50)}` : r.latency.p50,
        p99: r.latency.p99 > r.minCensoredMs ? `≥ ${ms(r.latency.p99)}` : r.latency.p99,
        pushP99: r.pushCallP99Ms,
        workerCpu: r.workerCpuUsPerId,
        redisCpu: r.redisCpuUsPerId,
        keptUp: r.keptUp === 'yes' ? 'yes' : `no (${r.keptUp})`,
      })),
      ratios,
      notes: [
        'Redis CPU per id counts the whole stream, pushes and runs, against the ids processed',
        "the pusher, the worker process and redis-server share the machine's cores",
      ],
      details: runs.map((r) => r.run),
    };
  },
};
