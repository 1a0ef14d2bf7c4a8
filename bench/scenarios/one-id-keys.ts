import { SCRIPTS, type CommandStat } from '../lib/commandstats';
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

/** Redis µs of the script calls (each with the commands it ran) in `stats`, per key. */
const scriptUsec = (stats: readonly CommandStat[] | undefined, keys: number): number | null =>
  stats ? stats.filter((s) => SCRIPTS.has(s.command)).reduce((sum, s) => sum + s.usec, 0) / Math.max(1, keys) : null;

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
      commandstats: true,
    }));
    const [ours, bullmq] = results;
    const drainMs = (r: Measured | undefined) => (r && !r.timedOut ? r.drainMs : undefined);
    const perKey = (r: Measured | undefined) => {
      if (!r || r.timedOut) return undefined;
      const push = scriptUsec(r.fill?.commandstats, r.backlogIds);
      const run = scriptUsec(r.commandstats, r.processed);
      return {
        push,
        run,
        total: push !== null && run !== null ? push + run : null,
        pushCpu: r.fill ? r.fill.redisCpuUs / Math.max(1, r.backlogIds) : null,
        workerCpu: r.workerCpuUsPerId,
      };
    };
    const [o, b] = [perKey(ours), perKey(bullmq)];
    return {
      id: 'one-id-keys',
      title: 'One id per key',
      setup:
        `${fmtInt(c.keys)} keys × 1 id, pushed first (one push per key, ${c.fillCallers} concurrent callers), then 1 worker process, ` +
        `concurrency ${c.concurrency}, empty handler. ` +
        `Every system gets all ${fmtInt(c.keys)} ids; bullmq-per-id adds each with Queue.add. The backlog case of the cost per key ` +
        `cycle (the paced case is "Redis cost per key cycle"): Redis µs in scripts is INFO commandstats usec of EVAL/EVALSHA/FCALL ` +
        `(each with the commands it ran), of the pushes and of the drain, per key; worker CPU is the worker process's over the drain.`,
      columns: [
        ...forRepeats(THROUGHPUT_COLUMNS, 1),
        { key: 'pushRedisCpu', label: 'push: Redis CPU µs/key', digits: 1 },
        { key: 'pushUsec', label: 'push: Redis µs in scripts/key', digits: 1 },
        { key: 'runUsec', label: 'run: Redis µs in scripts/key', digits: 1 },
      ],
      rows: results.map((r, i) => ({
        ...throughputRow(r),
        pushRedisCpu: [o, b][i]?.pushCpu ?? null,
        pushUsec: [o, b][i]?.push ?? null,
        runUsec: [o, b][i]?.run ?? null,
      })),
      ratios: [
        { name: 'drain time: ours / bullmq-per-id', value: ratio(drainMs(ours), drainMs(bullmq)), target: '<= 1.5 (aim 1.2)' },
        { name: 'worker CPU µs per key: ours / bullmq-per-id', value: ratio(o?.workerCpu, b?.workerCpu), target: '<= 1.5' },
        {
          name: 'Redis µs in scripts per key, push + run: ours / bullmq-per-id',
          value: ratio(o?.total ?? undefined, b?.total ?? undefined),
          target: '<= 1.5',
        },
        { name: 'Redis µs in scripts per key, run: ours / bullmq-per-id', value: ratio(o?.run ?? undefined, b?.run ?? undefined) },
        { name: 'Redis CPU µs per key, run: ours / bullmq-per-id', value: ratio(ours?.redisCpuUsPerId, bullmq?.redisCpuUsPerId) },
      ],
      notes: results.filter((r) => r.timedOut).map(projected),
      details: results,
    };
  },
};
