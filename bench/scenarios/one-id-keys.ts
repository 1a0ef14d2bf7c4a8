import { ratio } from '../lib/stats';
import type { SystemSpec } from '../systems';
import { fmtInt, forRepeats, runSystems, THROUGHPUT_COLUMNS, throughputRow, type Measured } from './common';
import type { Scenario } from './types';

const SYSTEMS: readonly SystemSpec[] = [{ id: 'ours' }, { id: 'bullmq-per-id' }];

/** Where a run timed out: the drain time its rate so far projects, for a note (never a ratio). */
function projected(r: Measured): string {
  return (
    `${r.system} timed out with ${fmtInt(r.processed)}/${fmtInt(r.expected)} ids processed; at its rate the drain would take ` +
    `~${(r.expected / r.idsPerSec || Number.NaN).toFixed(0)} s`
  );
}

/**
 * One id per key: ours pays a job, a run and a key's bookkeeping per id, like BullMQ pays a job per
 * id. Both get the same ids (no slowShare): the question is whether ours costs more than plain
 * BullMQ when there is nothing to batch.
 */
export const oneIdKeys: Scenario = {
  id: 'one-id-keys',
  async run(config) {
    const c = config.oneIdKeys;
    const results = await runSystems(SYSTEMS, (system) => ({
      system,
      processes: 1,
      concurrency: c.concurrency,
      costPerIdUs: 0,
      backlog: { keys: c.keys, idsPerKey: 1 },
      timeoutMs: c.timeoutMs,
      fillCallers: c.fillCallers,
    }));
    const [ours, bullmq] = results;
    const drainMs = (r: Measured | undefined) => (r && !r.timedOut ? r.drainMs : undefined);
    return {
      id: 'one-id-keys',
      title: 'One id per key',
      setup:
        `${fmtInt(c.keys)} keys × 1 id, pushed first (one push per key, ${c.fillCallers} concurrent callers), then 1 worker process, ` +
        `concurrency ${c.concurrency}, empty handler. ` +
        `Every system gets all ${fmtInt(c.keys)} ids; bullmq-per-id adds each with Queue.add.`,
      columns: forRepeats(THROUGHPUT_COLUMNS, 1),
      rows: results.map(throughputRow),
      ratios: [{ name: 'drain time: ours / bullmq-per-id', value: ratio(drainMs(ours), drainMs(bullmq)), target: '<= 1.5' }],
      notes: results.filter((r) => r.timedOut).map(projected),
      details: results,
    };
  },
};
