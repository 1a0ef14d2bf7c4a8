import { cpus } from 'node:os';
import { SLOW } from '../config';
import { ratio } from '../lib/stats';
import { systemFor, type SystemSpec } from '../systems';
import { drainWorkload, fmtInt, forRepeats, medianOf, runSystems, slowNote, THROUGHPUT_COLUMNS, throughputRow } from './common';
import type { Scenario } from './types';

/** Scenario 6: drain throughput with 1, 2 and 4 worker processes on the same Redis. */
export const scaleOut: Scenario = {
  id: 'scale-out',
  async run(config) {
    const c = config.scaleOut;
    const specs: SystemSpec[] = c.systems.map((id) => ({ id }));
    const plans = specs.flatMap((system) => c.processes.map((processes) => ({ system, processes })));
    const results = await runSystems(plans, ({ system, processes }) => drainWorkload(config, system, c, processes), c.repeats);
    const runs = plans.map((plan, i) => ({ processes: plan.processes, result: results[i]! }));
    const fewest = Math.min(...c.processes);
    const rate = (label: string, processes: number) =>
      runs.find((r) => r.result.system === label && r.processes === processes && !r.result.timedOut)?.result.idsPerSec;
    return {
      id: 'scale-out',
      title: 'Scale-out',
      setup:
        `${c.keys} keys × ${fmtInt(c.idsPerKey)} ids, ${c.processes.join(', ')} worker processes of concurrency ${c.concurrency} ` +
        `each, empty handler${medianOf(c.repeats)}. The machine has ${cpus().length} cores shared by Redis and the workers.`,
      columns: forRepeats([{ key: 'processes', label: 'processes' }, ...THROUGHPUT_COLUMNS], c.repeats),
      rows: runs.map((r) => ({ processes: r.processes, ...throughputRow(r.result) })),
      ratios: specs.flatMap((spec) => {
        const label = systemFor(spec).label;
        return c.processes
          .filter((n) => n !== fewest)
          .map((n) => ({ name: `${label}: ${n} / ${fewest} process ids/s`, value: ratio(rate(label, n), rate(label, fewest)) }));
      }),
      notes: [
        ...(c.systems.some((id) => SLOW.includes(id)) ? [slowNote(config)] : []),
        'raw ceiling is left out: its loops own keys inside one process, it has no cross-process ownership',
      ],
      details: runs,
    };
  },
};
