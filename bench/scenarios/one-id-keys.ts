import { scriptSplit, type CommandStat, type ScriptSplit } from '../lib/commandstats';
import { ratio } from '../lib/stats';
import type { SystemSpec } from '../systems';
import { fmtInt, runSystems, type Measured } from './common';
import type { Cell, Scenario } from './types';

const SYSTEMS: readonly SystemSpec[] = [{ id: 'ours' }, { id: 'bullmq-per-id' }];

/** Where a run timed out: the drain time its rate so far projects, for a note (never a ratio). */
function projected(r: Measured): string {
  return (
    `${r.system} timed out with ${fmtInt(r.processed)}/${fmtInt(r.expected)} ids processed; at its rate the drain would take ` +
    `~${(r.expected / r.idsPerSec || Number.NaN).toFixed(0)} s`
  );
}

/** One phase of a system's run (the pushes, or the drain), per key. */
interface Phase {
  keys: number;
  ms: number;
  /** Worker processes' CPU: the drain only (the pushes run in the bench's own process). */
  workerCpu: number | null;
  redisCpu: number;
  split: ScriptSplit;
}

const phase = (keys: number, ms: number, workerCpu: number | null, redisCpuUs: number, stats: readonly CommandStat[]): Phase => {
  const k = Math.max(1, keys);
  const s = scriptSplit(stats);
  return {
    keys,
    ms,
    workerCpu,
    redisCpu: redisCpuUs / k,
    split: {
      scriptCalls: s.scriptCalls / k,
      scriptUsec: s.scriptUsec / k,
      innerCalls: s.innerCalls / k,
      innerUsec: s.innerUsec / k,
      luaUsec: s.luaUsec / k,
      clientOnlyCalls: s.clientOnlyCalls / k,
    },
  };
};

/** Push and run of one key: the sum of both phases' figures per key (each phase has every key). */
function total(push: Phase, run: Phase): Phase {
  const sum = (pick: (s: ScriptSplit) => number) => pick(push.split) + pick(run.split);
  return {
    keys: run.keys,
    ms: push.ms + run.ms,
    workerCpu: run.workerCpu,
    redisCpu: push.redisCpu + run.redisCpu,
    split: {
      scriptCalls: sum((s) => s.scriptCalls),
      scriptUsec: sum((s) => s.scriptUsec),
      innerCalls: sum((s) => s.innerCalls),
      innerUsec: sum((s) => s.innerUsec),
      luaUsec: sum((s) => s.luaUsec),
      clientOnlyCalls: sum((s) => s.clientOnlyCalls),
    },
  };
}

/** A system's push, run and both, per key; undefined for a run that timed out or lacks the figures. */
function phases(r: Measured | undefined): { push: Phase; run: Phase; both: Phase } | undefined {
  if (!r || r.timedOut || !r.fill || !r.commandstats) return undefined;
  const push = phase(r.backlogIds, r.fill.ms, null, r.fill.redisCpuUs, r.fill.commandstats);
  const run = phase(r.processed, r.drainMs, r.workerCpuUsPerId, r.redisCpuUsPerId * r.processed, r.commandstats);
  return { push, run, both: total(push, run) };
}

function row(system: string, name: string, p: Phase | undefined): Record<string, Cell> {
  return {
    system,
    phase: name,
    keys: p?.keys ?? null,
    seconds: p ? p.ms / 1000 : null,
    keysPerSec: p && name !== 'push + run' ? (p.keys * 1000) / Math.max(1, p.ms) : null,
    workerCpu: p?.workerCpu ?? null,
    redisCpu: p?.redisCpu ?? null,
    scriptCalls: p?.split.scriptCalls ?? null,
    innerCalls: p?.split.innerCalls ?? null,
    scriptUsec: p?.split.scriptUsec ?? null,
    innerUsec: p?.split.innerUsec ?? null,
    luaUsec: p?.split.luaUsec ?? null,
  };
}

/**
 * One id per key: ours pays a job, a run and a key's bookkeeping per id, like BullMQ pays a job per
 * id. Both get the same ids (no slowShare): the question is whether ours costs more than plain
 * BullMQ when there is nothing to batch, and where in Redis: per phase, the script calls' time
 * split into the commands they ran and the rest (Lua beyond commands), beside redis-server's CPU.
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
    const [o, b] = [phases(ours), phases(bullmq)];
    const versus = (pick: (p: NonNullable<typeof o>) => number | null) => ratio(o ? pick(o) : null, b ? pick(b) : null);
    const TARGET = '<= 1.5 (aim 1.2)';
    return {
      id: 'one-id-keys',
      title: 'One id per key',
      setup:
        `${fmtInt(c.keys)} keys × 1 id, pushed first (one push per key, ${c.fillCallers} concurrent callers), then 1 worker process, ` +
        `concurrency ${c.concurrency}, empty handler. ` +
        `Every system gets all ${fmtInt(c.keys)} ids; bullmq-per-id adds each with Queue.add. The backlog case of the cost per key ` +
        `cycle (the paced case is "Redis cost per key cycle"). Per key, of the pushes (push), of the drain (run) and both: ` +
        "Redis CPU is INFO cpu (used_cpu_user + used_cpu_sys) of redis-server over the phase; worker CPU the worker process's over the " +
        'drain. INFO commandstats is reset before each phase and read after it: script calls and script µs are its EVAL/EVALSHA/FCALL ' +
        "lines (in Redis 7 a script call's usec includes the commands it ran); commands in scripts are every other line but those of " +
        'a documented list of commands clients send and scripts never run (bench/lib/commandstats.ts CLIENT_ONLY: blocking pops such as ' +
        "BullMQ's BZPOPMIN, MULTI/EXEC, INFO, CLIENT, PING...; a SLOWLOG of a small run found clients sending nothing else but a " +
        "startup's HSET or HKEYS, which count as in scripts); Lua beyond commands is script µs less their commands' µs.",
      columns: [
        { key: 'system', label: 'system' },
        { key: 'phase', label: 'phase' },
        { key: 'keys', label: 'keys' },
        { key: 'seconds', label: 's', digits: 2 },
        { key: 'keysPerSec', label: 'keys/s' },
        { key: 'workerCpu', label: 'worker CPU µs/key', digits: 1 },
        { key: 'redisCpu', label: 'Redis CPU µs/key', digits: 1 },
        { key: 'scriptCalls', label: 'script calls/key', digits: 2 },
        { key: 'innerCalls', label: 'commands in scripts/key', digits: 1 },
        { key: 'scriptUsec', label: 'script µs/key', digits: 1 },
        { key: 'innerUsec', label: "their commands' µs/key", digits: 1 },
        { key: 'luaUsec', label: 'Lua beyond commands µs/key', digits: 1 },
      ],
      rows: results.flatMap((r, i) => {
        const p = [o, b][i];
        const system = r.timedOut ? `${r.system} (timed out)` : r.system;
        return [row(system, 'push', p?.push), row(system, 'run', p?.run), row(system, 'push + run', p?.both)];
      }),
      ratios: [
        { name: 'drain time: ours / bullmq-per-id', value: ratio(drainMs(ours), drainMs(bullmq)), target: TARGET },
        { name: 'worker CPU µs per key: ours / bullmq-per-id', value: versus((p) => p.run.workerCpu), target: TARGET },
        { name: 'Redis CPU µs per key, push + run: ours / bullmq-per-id', value: versus((p) => p.both.redisCpu), target: TARGET },
        {
          name: 'Redis µs in scripts per key, push + run: ours / bullmq-per-id',
          value: versus((p) => p.both.split.scriptUsec),
          target: TARGET,
        },
        {
          name: 'Lua beyond commands µs per key, push + run: ours / bullmq-per-id',
          value: versus((p) => p.both.split.luaUsec),
          target: TARGET,
        },
        { name: 'Redis µs in scripts per key, run: ours / bullmq-per-id', value: versus((p) => p.run.split.scriptUsec) },
        { name: 'Redis CPU µs per key, run: ours / bullmq-per-id', value: versus((p) => p.run.redisCpu) },
        { name: 'Lua beyond commands µs per key, push: ours / bullmq-per-id', value: versus((p) => p.push.split.luaUsec) },
        { name: 'Lua beyond commands µs per key, run: ours / bullmq-per-id', value: versus((p) => p.run.split.luaUsec) },
      ],
      notes: results.filter((r) => r.timedOut).map(projected),
      details: results,
    };
  },
};
