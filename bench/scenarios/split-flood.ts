import { ratio } from '../lib/stats';
import { CONTENDED_COLUMNS, contendedRow, contendedSetup, FAIR, FIFO, fairVsFifo, runContended } from './contended';
import { TARGET_P99_MS } from './noisy-neighbour';
import type { Scenario } from './types';

/**
 * The split flood: the oversubscribed run's heavy ids, split by one tenant over many keys. Fair
 * scheduling favours keys that have not had a turn, so every new heavy key competes with the
 * light keys as an equal: this measures whether that defeats it.
 */
export const splitFlood: Scenario = {
  id: 'split-flood',
  async run(config) {
    const c = config.splitFlood;
    const results = await runContended(config, c, [FAIR, FIFO]);
    const [fair, fifo] = results;
    return {
      id: 'split-flood',
      title: 'Split flood',
      setup: contendedSetup(c),
      columns: CONTENDED_COLUMNS,
      rows: results.map(contendedRow),
      ratios: [
        { name: `ours light p99 / ${TARGET_P99_MS} ms`, value: ratio(fair?.light?.p99, TARGET_P99_MS), target: '< 1' },
        ...fairVsFifo(fair, fifo),
      ],
      notes: ['the same heavy ids as the oversubscribed run, over many more keys: one tenant splitting its flood'],
      details: results,
    };
  },
};
