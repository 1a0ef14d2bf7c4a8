import { scaled, type Config } from '../config';
import { fillFreshRedis, newTarget } from '../lib/fill';
import { backlogCalls, keyNames } from '../lib/push';
import { perSecond, ratio } from '../lib/stats';
import { inRounds, medianBy } from '../lib/repeat';
import { ALL, systemFor, type System } from '../systems';
import { fmtInt, forRepeats, medianOf, progress, slowNote, spread } from './common';
import type { Scenario } from './types';

interface EnqueueRun {
  system: string;
  pushes: string;
  callers: number;
  ids: number;
  ms: number;
  idsPerSec: number;
  bytesPerPendingId: number;
}

async function enqueueOnce(system: System, idsPerKey: number, callers: number, c: Config['enqueue']): Promise<EnqueueRun> {
  progress(`${system.label}: ${fmtInt(c.keys * idsPerKey)} ids, ${callers} caller(s)`);
  const calls = backlogCalls(keyNames('key-', c.keys), idsPerKey, c.callSize);
  const { ms, ids, bytesPerId } = await fillFreshRedis(
    (redis) => system.producer(newTarget(redis)),
    calls,
    callers,
    c.timeoutMs,
    system.label,
  );
  return { system: system.label, pushes: system.pushes, callers, ids, ms, idsPerSec: perSecond(ids, ms), bytesPerPendingId: bytesPerId };
}

/** Scenario 2: ids per second into Redis, in 1,000-id calls, from 1 caller and from several at once. */
export const enqueue: Scenario = {
  id: 'enqueue',
  async run(config) {
    const c = config.enqueue;
    const plans = c.callers.flatMap((callers) => ALL.map((spec) => ({ spec, callers })));
    const tasks = plans.map(
      ({ spec, callers }) =>
        () =>
          enqueueOnce(systemFor(spec), scaled(config, spec.id, c.idsPerKey), callers, c),
    );
    const runs = (await inRounds(tasks, c.repeats)).map((all) => ({
      ...medianBy(all, (r) => r.idsPerSec),
      runsIdsPerSec: all.map((r) => r.idsPerSec),
    }));
    const rate = (label: string, callers: number) => runs.find((r) => r.system === label && r.callers === callers)?.idsPerSec;
    return {
      id: 'enqueue',
      title: 'Enqueue',
      setup:
        `${c.keys} keys, calls of ${fmtInt(c.callSize)} ids taking the keys in turn; each caller awaits its call before the next; ` +
        `${c.callers.join(' and ')} concurrent callers${medianOf(c.repeats)}.`,
      columns: forRepeats(
        [
          { key: 'system', label: 'system' },
          { key: 'pushes', label: 'one call sends' },
          { key: 'callers', label: 'callers' },
          { key: 'ids', label: 'ids' },
          { key: 'idsPerSec', label: 'ids/s (median)' },
          { key: 'spread', label: 'ids/s of each run (min–max)' },
          { key: 'bytesPerPendingId', label: 'Redis bytes/pending id', digits: 0 },
        ],
        c.repeats,
      ),
      rows: runs.map(({ runsIdsPerSec, ...r }) => ({ ...r, spread: spread(runsIdsPerSec) })),
      ratios: c.callers.flatMap((callers) => [
        {
          name: `ours / raw RPUSH (${callers} caller${callers > 1 ? 's' : ''})`,
          value: ratio(rate('ours', callers), rate('raw ceiling', callers)),
          target: '>= 0.8',
        },
        { name: `ours / bullmq addBulk per id (${callers})`, value: ratio(rate('ours', callers), rate('bullmq-per-id', callers)) },
        { name: `ours / bullmq addBulk chunks (${callers})`, value: ratio(rate('ours', callers), rate('bullmq-chunks', callers)) },
        { name: `ours / groupmq add (${callers})`, value: ratio(rate('ours', callers), rate('groupmq', callers)) },
      ]),
      notes: [slowNote(config)],
      details: runs,
    };
  },
};
