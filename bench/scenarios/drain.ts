import { ALL } from '../systems';
import { ratio } from '../lib/stats';
import { byLabel, drainWorkload, forRepeats, medianOf, runSystems, slowNote, THROUGHPUT_COLUMNS, throughputRow } from './common';
import type { Scenario } from './types';

/** Scenario 1: how fast one worker process empties a backlog when the handler costs nothing. */
export const drain: Scenario = {
  id: 'drain',
  async run(config) {
    const c = config.drain;
    const results = await runSystems(ALL, (system) => drainWorkload(config, system, c), c.repeats);
    const rate = (label: string) => byLabel(results, label)?.idsPerSec;
    return {
      id: 'drain',
      title: 'Drain throughput',
      setup:
        `${c.keys} keys × ${c.idsPerKey.toLocaleString('en-US')} ids pushed first, then 1 worker process, concurrency ` +
        `${c.concurrency}, empty handler${medianOf(c.repeats)}.`,
      columns: forRepeats(
        [
          ...THROUGHPUT_COLUMNS,
          { key: 'bytesPerId', label: 'Redis bytes/pending id', digits: 0 },
          { key: 'rss', label: 'worker RSS MB (start → end)' },
        ],
        c.repeats,
      ),
      rows: results.map((r) => ({
        ...throughputRow(r),
        bytesPerId: r.bytesPerPendingId,
        rss: `${r.workerRssReadyMb.toFixed(0)} → ${r.workerRssEndMb.toFixed(0)}`,
      })),
      ratios: [
        { name: 'ours / bullmq-per-id', value: ratio(rate('ours'), rate('bullmq-per-id')), target: '>= 50' },
        { name: 'ours / groupmq', value: ratio(rate('ours'), rate('groupmq')), target: '> 1' },
        { name: 'ours / raw ceiling', value: ratio(rate('ours'), rate('raw ceiling')), target: '>= 0.8' },
        { name: 'ours / bullmq-chunks', value: ratio(rate('ours'), rate('bullmq-chunks')) },
      ],
      notes: [slowNote(config)],
      details: results,
    };
  },
};
