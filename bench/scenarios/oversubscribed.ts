import { ratio } from '../lib/stats';
import { PEERS } from '../systems';
import { p99Ratios, slowNote } from './common';
import { CONTENDED_COLUMNS, contendedRow, contendedSetup, DRAINED_NOTE, FAIR, FIFO, fairVsFifo, runContended } from './contended';
import { TARGET_P99_MS } from './noisy-neighbour';
import type { Scenario } from './types';

/**
 * More heavy keys than worker slots, light keys pushing
 * meanwhile. Ours fair (the default) against ours fifo (requeue by runtime budget alone) and the peers.
 */
export const oversubscribed: Scenario = {
  id: 'oversubscribed',
  async run(config) {
    const c = config.oversubscribed;
    const results = await runContended(config, c, [FAIR, FIFO, ...PEERS]);
    const [fair, fifo] = results;
    return {
      id: 'oversubscribed',
      title: 'Oversubscribed',
      setup: contendedSetup(c),
      columns: CONTENDED_COLUMNS,
      rows: results.map(contendedRow),
      ratios: [
        { name: `ours light p99 / ${TARGET_P99_MS} ms`, value: ratio(fair?.light?.p99, TARGET_P99_MS), target: '< 1' },
        ...fairVsFifo(fair, fifo, '>= 0.9'),
        ...p99Ratios(results.slice(2), fair),
      ],
      notes: [
        slowNote(config),
        DRAINED_NOTE,
        "under fifo a light key's job joins the back of the wait list behind every heavy job, and no heavy run spends the default 300 " +
          's budget, ' +
          'so light keys wait for the whole heavy backlog: a fifo run lasts a full drain',
      ],
      details: results,
    };
  },
};
