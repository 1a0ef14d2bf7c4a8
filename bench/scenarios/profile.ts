import { ALL } from '../systems';
import type { CommandProfile } from '../lib/slowlog';
import { drainWorkload, fmtInt, runSystems, slowNote } from './common';
import type { Scenario } from './types';

/** Commands shown per system in the table; results.json keeps them all. */
const TOP = 4;

const per100 = (n: number, ids: number) => (n * 100) / Math.max(1, ids);

/**
 * Where each system's Redis time goes: a small drain with every command logged (SLOWLOG), giving
 * round trips and Redis µs per 100 ids, by command or script. Separate from the timed runs because
 * logging every command slows Redis down.
 */
export const profile: Scenario = {
  id: 'profile',
  async run(config) {
    const c = config.profile;
    const results = await runSystems(ALL, (system) => ({ ...drainWorkload(config, system, c), profile: true }));
    const top = (commands: readonly CommandProfile[], ids: number) =>
      commands
        .slice(0, TOP)
        .map((cmd) => `${cmd.command} ${per100(cmd.calls, ids).toFixed(2)}× ${per100(cmd.usec, ids).toFixed(0)} µs`)
        .join('; ');
    return {
      id: 'profile',
      title: 'Redis round trips and time per 100 ids (SLOWLOG of a small drain)',
      setup:
        `${c.keys} keys × ${fmtInt(c.idsPerKey)} ids, 1 worker process, concurrency ${c.concurrency}, empty handler, every ` +
        `command logged. Per 100 ids processed.`,
      columns: [
        { key: 'system', label: 'system' },
        { key: 'ids', label: 'ids' },
        { key: 'roundTrips', label: 'round trips', digits: 2 },
        { key: 'usec', label: 'Redis µs', digits: 0 },
        { key: 'top', label: `top ${TOP} by Redis time: calls, µs` },
      ],
      rows: results.map((r) => ({
        system: r.slowlog?.truncated ? `${r.system} (log full)` : r.system,
        ids: r.processed,
        roundTrips: per100(r.slowlog?.roundTrips ?? 0, r.processed),
        usec: per100(r.slowlog?.usec ?? 0, r.processed),
        top: top(r.slowlog?.commands ?? [], r.processed),
      })),
      ratios: [],
      notes: [slowNote(config), 'a script counts once with its whole run time (its inner commands are not round trips)'],
      details: results.map((r) => ({ system: r.system, processed: r.processed, slowlog: r.slowlog })),
    };
  },
};
