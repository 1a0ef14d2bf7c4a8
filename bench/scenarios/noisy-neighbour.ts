import { scaled } from '../config';
import { ratio } from '../lib/stats';
import { ALL, type SystemSpec } from '../systems';
import { fmtInt, LATENCY_COLUMNS, latencyRow, p99Ratios, runSystems, slowNote } from './common';
import type { Scenario } from './types';

/** The goal for ours (the target column of docs/performance.md); also drawn on the chart. */
export const TARGET_P99_MS = 100;

/**
 * Scenario 3: one key with a big backlog and a handler that costs 1 ms per 100 ids; light keys push
 * a few ids during the drain. Ours also runs with the per-id systems' smaller flood, to show that its
 * light-key latency does not depend on the flood size.
 */
export const noisyNeighbour: Scenario = {
  id: 'noisy-neighbour',
  async run(config) {
    const c = config.noisy;
    const oursSmall: SystemSpec = { id: 'ours' };
    const plan = [...ALL, oursSmall];
    const floodOf = (spec: SystemSpec) =>
      spec === oursSmall ? scaled(config, 'groupmq', c.floodIds) : scaled(config, spec.id, c.floodIds);
    const results = await runSystems(plan, (system) => ({
      system,
      processes: 1,
      concurrency: c.concurrency,
      costPerIdUs: c.costPerIdUs,
      backlog: { keys: 1, idsPerKey: floodOf(system) },
      light: c.light,
      timeoutMs: c.timeoutMs,
    }));
    const ours = results[0];
    const oursAtSmallFlood = results[results.length - 1];
    const l = c.light;
    return {
      id: 'noisy-neighbour',
      title: 'Noisy neighbour',
      setup:
        `1 heavy key (backlog pushed first), handler ${c.costPerIdUs} µs of CPU per id (1 ms per 100), concurrency ${c.concurrency}, 1 ` +
        `worker process; ` +
        `${l.keys} light keys each push ${l.idsPerPush} ids ${l.pushesPerKey}× at random moments (same seed for all) in the first ` +
        `${fmtInt(l.windowMs)} ms of the drain. ` +
        'Latency: from the push call to the end of the handler call that processed the id.',
      columns: LATENCY_COLUMNS,
      rows: results.map(latencyRow),
      ratios: [
        { name: `ours light p99 / ${TARGET_P99_MS} ms`, value: ratio(ours?.light?.p99, TARGET_P99_MS), target: '< 1' },
        {
          name: `ours light p99: ${fmtInt(ours?.backlogIds ?? 0)} / ${fmtInt(oursAtSmallFlood?.backlogIds ?? 0)} heavy ids`,
          value: ratio(ours?.light?.p99, oursAtSmallFlood?.light?.p99),
          target: '~1 (independent of flood size)',
        },
        ...p99Ratios(results.slice(1, -1), ours),
      ],
      notes: [slowNote(config), 'the last row is ours again with the smaller flood the per-id systems got'],
      details: results,
    };
  },
};
