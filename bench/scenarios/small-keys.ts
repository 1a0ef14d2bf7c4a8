import { scaled, type Config, type KeyShape } from '../config';
import { ratio } from '../lib/stats';
import type { SystemSpec } from '../systems';
import { byLabel, fmtInt, forRepeats, runSystems, THROUGHPUT_COLUMNS, throughputRow, type Measured } from './common';
import type { Scenario } from './types';

const SYSTEMS: readonly SystemSpec[] = [{ id: 'ours' }, { id: 'bullmq-per-id' }, { id: 'bullmq-per-key' }];

const shapeName = (s: KeyShape) => `${fmtInt(s.keys)} × ${fmtInt(s.idsPerKey)}`;

/**
 * The per-id system gets slowShare of the keys (not of the ids per key): its jobs ignore the key,
 * so fewer keys of the same size is the same work per id, and the share is exact.
 */
function runShape(config: Config, shape: KeyShape): Promise<Measured[]> {
  const c = config.smallKeys;
  return runSystems(SYSTEMS, (system) => ({
    system,
    processes: 1,
    concurrency: c.concurrency,
    costPerIdUs: 0,
    backlog: { keys: scaled(config, system.id, shape.keys), idsPerKey: shape.idsPerKey },
    timeoutMs: c.timeoutMs,
    fillCallers: c.fillCallers,
  }));
}

/**
 * Many accounts, small pushes: a backlog of many keys with a few ids each (one performBatchLater
 * per key), drained. Each key costs ours a job and a run; with 10 ids per key the per-key overhead
 * is paid per 10 ids instead of per 100-id slice.
 */
export const smallKeys: Scenario = {
  id: 'small-keys',
  async run(config) {
    const c = config.smallKeys;
    const runs: { shape: KeyShape; results: Measured[] }[] = [];
    for (const shape of c.shapes) runs.push({ shape, results: await runShape(config, shape) });
    const rate = (results: Measured[], label: string) => byLabel(results, label)?.idsPerSec;
    return {
      id: 'small-keys',
      title: 'Small keys',
      setup:
        `${c.shapes.map((s) => `${shapeName(s)} ids`).join(' and ')} (keys × ids per key), pushed first, one push per key carrying all ` +
        `its ids ` +
        `(${c.fillCallers} concurrent callers), then 1 worker process, concurrency ${c.concurrency}, empty handler. ` +
        'bullmq-per-key: one plain BullMQ job per push (per key) with all its ids, no per-key exclusivity.',
      columns: forRepeats([{ key: 'shape', label: 'keys × ids' }, ...THROUGHPUT_COLUMNS, { key: 'keysPerSec', label: 'keys/s' }], 1),
      rows: runs.flatMap(({ shape, results }) =>
        results.map((r) => ({
          shape: shapeName(shape),
          ...throughputRow(r),
          keysPerSec: (r.processed / shape.idsPerKey / r.drainMs) * 1000,
        })),
      ),
      ratios: runs.flatMap(({ shape, results }) => [
        {
          name: `${shapeName(shape)}: ours / bullmq-per-id ids/s`,
          value: ratio(rate(results, 'ours'), rate(results, 'bullmq-per-id')),
          target: '>= 10',
        },
        {
          name: `${shapeName(shape)}: ours / bullmq-per-key ids/s`,
          value: ratio(rate(results, 'ours'), rate(results, 'bullmq-per-key')),
          target: '>= 0.5',
        },
      ]),
      notes: [
        `bullmq-per-id ran ${Math.round(config.slowShare * 100)}% of the keys, with the same ids per key (one job per id is ~100x ` +
          `slower); rates are per second and ratios compare rates`,
      ],
      details: runs,
    };
  },
};
