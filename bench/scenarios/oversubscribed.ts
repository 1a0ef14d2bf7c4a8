import { ratio } from '../lib/stats';
import { PEERS, type SystemSpec } from '../systems';
import { backlogFor, fmtInt, LATENCY_COLUMNS, latencyRow, p99Ratios, runSystems, slowNote } from './common';
import type { Scenario } from './types';

/**
 * Scenario 4: more heavy keys than worker slots. With only a runtime budget, a light key waits
 * behind whole heavy runs; this measures that cost at the default budget and at 1 s.
 */
export const oversubscribed: Scenario = {
  id: 'oversubscribed',
  async run(config) {
    const c = config.oversubscribed;
    const plan: SystemSpec[] = [{ id: 'ours' }, { id: 'ours', variant: { maxRuntimeMs: c.maxRuntimeMs } }, ...PEERS];
    const results = await runSystems(plan, (system) => ({
      system,
      processes: 1,
      concurrency: c.concurrency,
      costPerIdUs: c.costPerIdUs,
      backlog: backlogFor(config, system, c.heavyKeys, c.idsPerHeavyKey),
      light: c.light,
      timeoutMs: c.timeoutMs,
    }));
    const [oursDefault, oursShort] = results;
    const l = c.light;
    return {
      id: 'oversubscribed',
      title: 'Oversubscribed',
      setup:
        `${c.heavyKeys} heavy keys × ${fmtInt(c.idsPerHeavyKey)} ids, concurrency ${c.concurrency}, handler ${c.costPerIdUs} µs of CPU per id; ` +
        `light keys as in the noisy-neighbour scenario (${l.keys} keys × ${l.idsPerPush} ids × ${l.pushesPerKey}, first ${fmtInt(l.windowMs)} ms).`,
      columns: LATENCY_COLUMNS,
      rows: results.map(latencyRow),
      ratios: [
        { name: `ours light p99: default maxRuntimeMs / maxRuntimeMs ${c.maxRuntimeMs}`, value: ratio(oursDefault?.light?.p99, oursShort?.light?.p99) },
        ...p99Ratios(results.slice(2), oursDefault),
      ],
      notes: [
        slowNote(config),
        'time-slicing by runtime budget alone: a light key\'s job joins the back of the wait list, behind every heavy job already queued, and a yielding heavy job goes back there too; ' +
          'here each heavy run (200 ms of handler CPU, ~1 s of wall time with 4 runs sharing one core) mostly ends before a 1 s budget fires, so the budget barely helps',
      ],
      details: results,
    };
  },
};
