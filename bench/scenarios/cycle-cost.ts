import { UNREACHED_GLOBAL_LIMITS } from '../config';
import { perCycle, runCycleCost, type CycleCost } from '../lib/cycles';
import { ratio } from '../lib/stats';
import { systemFor, type SystemSpec } from '../systems';
import { fmtInt, progress } from './common';
import type { Scenario } from './types';

/** The third, ours with batcher-wide limits in force that never bind: what they cost a cycle. */
const LIMITED: SystemSpec = { id: 'ours', variant: UNREACHED_GLOBAL_LIMITS };
const SYSTEMS: readonly SystemSpec[] = [{ id: 'ours' }, { id: 'bullmq-per-id' }, LIMITED];

/** The limits' script calls (limits-enter.lua, limits-leave.lua and the rest) per cycle, from the logged pass. */
const limitCalls = (c: CycleCost) =>
  Object.entries(c.scripts)
    .filter(([name]) => name.startsWith('bbk limits-'))
    .reduce((n, [, calls]) => n + calls, 0);

/** Scripts shown per system in the table; results.json keeps them all. */
const TOP = 5;

const scriptsLine = (c: CycleCost) =>
  Object.entries(c.scripts)
    .slice(0, TOP)
    .map(([name, calls]) => `${name} ${calls.toFixed(2)}`)
    .join('; ');

/**
 * What one key cycle (one id pushed to a new key, then processed) costs Redis: commands, script
 * calls and execution time, against one plain BullMQ job per id (Queue.add, then processed).
 */
export const cycleCost: Scenario = {
  id: 'cycle-cost',
  async run(config) {
    const c = config.cycleCost;
    const results: CycleCost[] = [];
    for (const spec of SYSTEMS) {
      progress(`${systemFor(spec).label}: ${fmtInt(c.keys)} key cycles at ${fmtInt(c.ratePerSec)}/s`);
      const r = await runCycleCost(spec, c);
      if (r.timedOut) progress(`${r.system}: TIMED OUT (not every id processed within ${c.timeoutMs} ms)`);
      results.push(r);
    }
    const find = (label: string) => results.find((r) => r.system === label && !r.timedOut);
    const [ours, bullmq, limited] = [find('ours'), find('bullmq-per-id'), find(systemFor(LIMITED).label)];
    const per = (r: CycleCost | undefined, pick: (r: CycleCost) => number) => (r ? perCycle(r, pick(r)) : undefined);
    return {
      id: 'cycle-cost',
      title: 'Redis cost per key cycle',
      setup:
        `${fmtInt(c.keys)} distinct keys each get one push of 1 id (paced at ${fmtInt(c.ratePerSec)} pushes/s, so each key cycle runs ` +
        `on its own), 1 worker process, concurrency ${c.concurrency}, empty handler; ` +
        `INFO commandstats is reset before the pushes and read once every id is processed; per key cycle (push + the run of its one id). ` +
        'Commands: every command Redis executed, those run by scripts and in MULTI/EXEC included. Client commands: those clients sent ' +
        '(each command of a MULTI once), from a further pass of up to 500 cycles with SLOWLOG on. ' +
        'Redis µs: INFO commandstats usec of the commands clients sent, each once (a script with the commands it runs; EXEC left out, ' +
        'its commands counted). Redis CPU: INFO cpu of redis-server over the pushes and runs.',
      columns: [
        { key: 'system', label: 'system' },
        { key: 'cycles', label: 'key cycles' },
        { key: 'commands', label: 'commands', digits: 1 },
        { key: 'sent', label: 'client commands', digits: 1 },
        { key: 'scripts', label: 'script calls', digits: 2 },
        { key: 'usec', label: 'Redis µs', digits: 0 },
        { key: 'cpu', label: 'Redis CPU µs', digits: 0 },
        { key: 'idle', label: 'idle commands/s', digits: 1 },
        { key: 'top', label: `scripts per cycle (top ${TOP})` },
      ],
      rows: results.map((r) => ({
        system: r.timedOut ? `${r.system} (timed out)` : r.slowlogTruncated ? `${r.system} (log full)` : r.system,
        cycles: r.cycles,
        commands: perCycle(r, r.commands),
        sent: perCycle(r, r.sentCommands),
        scripts: perCycle(r, r.scriptCalls),
        usec: perCycle(r, r.usec),
        cpu: perCycle(r, r.redisCpuUs),
        idle: r.idleCommandsPerSec,
        top: scriptsLine(r),
      })),
      ratios: [
        {
          name: 'Redis µs per key cycle: ours / bullmq-per-id',
          value: ratio(
            per(ours, (r) => r.usec),
            per(bullmq, (r) => r.usec),
          ),
          target: '<= 1.2',
        },
        {
          name: 'Redis CPU µs per key cycle: ours / bullmq-per-id',
          value: ratio(
            per(ours, (r) => r.redisCpuUs),
            per(bullmq, (r) => r.redisCpuUs),
          ),
        },
        {
          name: 'commands per key cycle: ours / bullmq-per-id',
          value: ratio(
            per(ours, (r) => r.commands),
            per(bullmq, (r) => r.commands),
          ),
        },
        {
          name: 'client commands per key cycle: ours / bullmq-per-id',
          value: ratio(
            per(ours, (r) => r.sentCommands),
            per(bullmq, (r) => r.sentCommands),
          ),
        },
        {
          name: 'commands per key cycle: batcher-wide limits in force / none',
          value: ratio(
            per(limited, (r) => r.commands),
            per(ours, (r) => r.commands),
          ),
        },
        { name: 'limits script calls per key cycle, none in force', value: ours ? limitCalls(ours) : null, target: '0' },
        { name: 'limits script calls per key cycle, in force', value: limited ? limitCalls(limited) : null },
      ],
      notes: [
        `all figures per key cycle except idle commands/s (the worker idling ${fmtInt(c.idleMs)} ms before the pushes; not subtracted)`,
        'summing every INFO commandstats usec would count the commands scripts and EXEC run twice ' +
          "(once in the script's or EXEC's usec, once on their own line), hence the client-commands pass",
        `${systemFor(LIMITED).label}: batcher-wide limits in force that no run reaches, so what they cost shows alone: a one-id ` +
          "run passes them before each claim (its one slice's, and the claim that finds the key empty) and leaves them at its end",
      ],
      details: results,
    };
  },
};
