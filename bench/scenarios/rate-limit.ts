import { UNREACHED_GLOBAL_LIMITS, type Config, type FlowPlan } from '../config';
import { SCRIPTS } from '../lib/commandstats';
import { busiestWindow, idsStartedIn, runFlow, spreadRate, type FlowResult } from '../lib/flow';
import { ratio } from '../lib/stats';
import { systemFor, type SystemSpec } from '../systems';
import { drainWorkload, fmtInt, progress, runSystems, type Measured } from './common';
import type { Cell, Ratio, Scenario } from './types';

/** Key prefixes: the limited key, the key calling retryAfter, and the keys beside them. */
const LIMITED = 'limited-';
const RETRYING = 'retrying-';
const OTHERS = 'other-';

const fixed = (value: number | null | undefined, digits: number): Cell =>
  value === null || value === undefined || !Number.isFinite(value)
    ? null
    : value.toLocaleString('en-US', { minimumFractionDigits: digits, maximumFractionDigits: digits });
const int = (value: number | null | undefined): Cell => fixed(value, 0);
const seconds = (ms: number) => `${(ms / 1000).toFixed(1)} s`;

/** The other keys' ids/s, or null where they ran out of ids inside the window (the rate would be too low). */
const othersRate = (r: FlowResult | undefined): number | null => (r && !r.window.othersDrained ? r.window.othersIdsPerSec : null);

interface Accuracy {
  limited: FlowResult;
  control: FlowResult;
  /** Limited ids/s over the window, each slice spread over the limit's window (see spreadRate). */
  rate: number;
  /** Limited ids of the slices that started in the window, per second: the same, counted as points. */
  pointRate: number;
  /**
   * The most limited ids in any limit window: of the claims (Redis clock), null if the log was read
   * too seldom; of the handler calls' starts.
   */
  busiestClaims: number | null;
  busiestStarts: number;
  /** The longest gap between two limited slices' starts: more than a limit window is time spent waiting for a worker slot. */
  longestPauseMs: number;
}

/** 1: one limited key beside unlimited keys, 2 processes, then the same without the limited key. */
async function accuracy(c: FlowPlan['accuracy']): Promise<Accuracy> {
  const system: SystemSpec = { id: 'ours', variant: { rateLimit: { ...c.limit, keyPrefix: LIMITED } } };
  const run = (withLimited: boolean) => {
    progress(
      `${systemFor(system).label}: ${withLimited ? `1 limited key × ${fmtInt(c.limitedIds)} ids + ` : 'control, '}` +
        `${c.keys} keys × ${fmtInt(c.idsPerKey)} ids, ${c.processes} processes`,
    );
    return runFlow({
      system,
      processes: c.processes,
      concurrency: c.concurrency,
      others: { prefix: OTHERS, keys: c.keys, idsPerKey: c.idsPerKey },
      ...(withLimited && { traced: { prefix: LIMITED, keys: 1, idsPerKey: c.limitedIds }, claimLog: true }),
      light: c.light,
      warmupMs: c.warmupMs,
      windowMs: c.windowMs,
      timeoutMs: c.timeoutMs,
    });
  };
  const limited = await run(true);
  const control = await run(false);
  const { from, to } = limited.window;
  const claims = limited.claims;
  const starts = limited.slices.map(([, ids, startedAt]): [number, number] => [startedAt, ids]);
  return {
    limited,
    control,
    rate: spreadRate(limited.slices, from, to, c.limit.durationMs),
    pointRate: (idsStartedIn(limited.slices, from, to) * 1000) / (to - from),
    busiestClaims: claims && claims.maxPollGapMs < c.limit.durationMs ? busiestWindow(claims.entries, c.limit.durationMs) : null,
    busiestStarts: busiestWindow(starts, c.limit.durationMs),
    longestPauseMs: Math.max(0, ...starts.slice(1).map(([at], i) => at - starts[i]![0])),
  };
}

/** 2: keys with backlogs and one calling retryAfter, then the same with no retryAfter. */
async function retry(c: FlowPlan['retry']): Promise<{ retrying: FlowResult; control: FlowResult }> {
  const run = (system: SystemSpec) => {
    progress(
      `${systemFor(system).label}: ${c.keys} keys × ${fmtInt(c.idsPerKey)} ids + 1 × ${fmtInt(c.retryingIds)}, ${c.sliceWaitMs} ms per ` +
        `slice, 1 process × ${c.concurrency} slots`,
    );
    return runFlow({
      system,
      processes: 1,
      concurrency: c.concurrency,
      sliceWaitMs: c.sliceWaitMs,
      others: { prefix: OTHERS, keys: c.keys, idsPerKey: c.idsPerKey },
      traced: { prefix: RETRYING, keys: 1, idsPerKey: c.retryingIds },
      drainTraced: true,
      warmupMs: c.warmupMs,
      windowMs: c.windowMs,
      timeoutMs: c.timeoutMs,
    });
  };
  const retrying = await run({ id: 'ours', variant: { retryAfter: { keyPrefix: RETRYING, every: c.every, ms: c.retryAfterMs } } });
  const control = await run({ id: 'ours' });
  return { retrying, control };
}

/**
 * Figures of a drain per 100 ids, from INFO commandstats and INFO cpu; per slice too, where every
 * slice is full (`sliceSize` divides each key's ids), so slices = ids / sliceSize.
 */
function claimCost(r: Measured | undefined, sliceSize: number) {
  if (!r || r.timedOut || !r.commandstats) return undefined;
  const per100 = (n: number) => (n * 100) / Math.max(1, r.processed);
  const perSlice = (n: number) => (n * sliceSize) / Math.max(1, r.processed);
  const calls = (pick: (command: string) => boolean) => r.commandstats!.filter((s) => pick(s.command)).reduce((n, s) => n + s.calls, 0);
  return {
    scriptUsec: per100(r.commandstats.filter((s) => SCRIPTS.has(s.command)).reduce((n, s) => n + s.usec, 0)),
    commandsPerSlice: perSlice(calls(() => true)),
    scriptCallsPerSlice: perSlice(calls((command) => SCRIPTS.has(command))),
    redisCpu: r.redisCpuUsPerId * 100,
    idsPerSec: r.idsPerSec,
  };
}

interface Cost {
  /** A per-key rateLimit that never binds, on every key. */
  on: Measured | undefined;
  /** Batcher-wide limits that never bind. */
  global: Measured | undefined;
  off: Measured | undefined;
}

/** 3: the same backlog drained with a per-key limit that never binds, with batcher-wide ones, and with none. */
async function cost(config: Config, c: FlowPlan['cost']): Promise<Cost> {
  const specs: SystemSpec[] = [
    { id: 'ours', variant: { rateLimit: c.limit } },
    { id: 'ours', variant: UNREACHED_GLOBAL_LIMITS },
    { id: 'ours' },
  ];
  const [on, global, off] = await runSystems(specs, (system) => ({ ...drainWorkload(config, system, c), commandstats: true }));
  return { on, global, off };
}

const done = (r: FlowResult) =>
  `${fmtInt(r.tracedDone.ids)}/${fmtInt(r.tracedIds)}${r.timedOut ? ' (timed out)' : ''}, last at ${seconds(r.tracedDone.lastMs)}`;

/**
 * Flow control (the `rateLimit` option and `ctx.retryAfter`), each beside a control run of the
 * same setup without it: how closely a limited key keeps to its limit across worker processes,
 * whether limited and retrying keys leave the worker slots to the other keys while they wait,
 * and what a limit adds to the claim in Redis.
 */
export const rateLimit: Scenario = {
  id: 'rate-limit',
  async run(config) {
    const p = config.rateLimit;
    const [a, r, k] = [p.accuracy, p.retry, p.cost];
    const acc = await accuracy(a);
    const ret = await retry(r);
    const cst = await cost(config, k);
    const [on, global, off] = [cst.on, cst.global, cst.off].map((m) => claimCost(m, k.sliceSize));
    const limitPerSec = (a.limit.max * 1000) / a.limit.durationMs;
    const windowLabel = `${fmtInt(a.limit.durationMs)} ms`;
    const part1 = `1. rateLimit, ${a.processes} processes × ${a.concurrency}`;
    const part2 = `2. retryAfter, 1 process × ${r.concurrency}`;
    const part3 = '3. claim cost, drain';
    const row = (part: string, figure: string, withFlow: Cell, control: Cell, withGlobal: Cell = null) => ({
      part,
      figure,
      on: withFlow,
      global: withGlobal,
      off: control,
    });
    const lightP99 = (f: FlowResult) => fixed(f.light?.p99, 1);
    /** A part-3 row: the figure of each of its three drains. */
    const costRow = (figure: string, cell: (c: typeof on) => Cell) => row(part3, figure, cell(on), cell(off), cell(global));

    const ratios: Ratio[] = [
      { name: `limited key ids/s / limit (${fmtInt(limitPerSec)}/s)`, value: ratio(acc.rate, limitPerSec), target: '0.95–1.05' },
      {
        name: `most limited ids claimed in any ${windowLabel} (Redis log) / max`,
        value: ratio(acc.busiestClaims, a.limit.max),
        target: '<= 1',
      },
      { name: `most limited ids whose handler call started in any ${windowLabel} / max`, value: ratio(acc.busiestStarts, a.limit.max) },
      {
        name: 'other keys ids/s: with the limited key / without',
        value: ratio(othersRate(acc.limited), othersRate(acc.control)),
        target: '~1',
      },
      {
        name: 'light p99: with the limited key / without',
        value: acc.limited.timedOut || acc.control.timedOut ? null : ratio(acc.limited.light?.p99, acc.control.light?.p99),
      },
      {
        name: 'worker-slot utilisation: retryAfter / control',
        value: ratio(ret.retrying.window.utilisation, ret.control.window.utilisation),
        target: '~1',
      },
      { name: 'other keys ids/s: retryAfter / control', value: ratio(othersRate(ret.retrying), othersRate(ret.control)) },
      { name: 'Redis µs (scripts) per 100 ids: limit on / off', value: ratio(on?.scriptUsec, off?.scriptUsec) },
      { name: 'Redis CPU µs per 100 ids: limit on / off', value: ratio(on?.redisCpu, off?.redisCpu) },
      { name: 'drain ids/s: limit on / off', value: ratio(on?.idsPerSec, off?.idsPerSec) },
      { name: 'commands per slice: batcher-wide limits on / off', value: ratio(global?.commandsPerSlice, off?.commandsPerSlice) },
      { name: 'Redis CPU µs per 100 ids: batcher-wide limits on / off', value: ratio(global?.redisCpu, off?.redisCpu) },
      { name: 'drain ids/s: batcher-wide limits on / off', value: ratio(global?.idsPerSec, off?.idsPerSec) },
    ];

    const drained = [acc.limited, acc.control, ret.retrying, ret.control].filter((f) => f.window.othersDrained);
    return {
      id: 'rate-limit',
      title: 'Flow control: rateLimit and retryAfter',
      setup:
        `1: one key limited to ${fmtInt(a.limit.max)} ids per ${windowLabel} with ${fmtInt(a.limitedIds)} ids, beside ${a.keys} ` +
        `unlimited keys × ${fmtInt(a.idsPerKey)} ids ` +
        `(all pushed first, the limited key's first), empty handler, ${a.processes} worker processes of concurrency ${a.concurrency}; ` +
        `${a.light.keys} light keys each push ${a.light.idsPerPush} ids ${a.light.pushesPerKey}× at random moments in the window. ` +
        `Figures over a ${fmtInt(a.windowMs)} ms window after ${fmtInt(a.warmupMs)} ms of warm-up; control: the same without the ` +
        `limited key. ` +
        `2: ${r.keys} keys × ${fmtInt(r.idsPerKey)} ids and 1 key × ${fmtInt(r.retryingIds)} ids (pushed first) whose handler calls ` +
        `ctx.retryAfter(${fmtInt(r.retryAfterMs)}) ` +
        `instead of every ${r.every}th slice; the handler waits ${r.sliceWaitMs} ms per slice (a call to another service); 1 worker ` +
        `process of concurrency ${r.concurrency}; ` +
        `figures over a ${fmtInt(r.windowMs)} ms window after ${fmtInt(r.warmupMs)} ms, then the run goes on until every id of the ` +
        `retrying key is processed; control: no retryAfter. ` +
        `Worker-slot utilisation: time in handler calls / (slots × window). ` +
        `3: ${k.keys} keys × ${fmtInt(k.idsPerKey)} ids drained by 1 worker process of concurrency ${k.concurrency}, empty handler, ` +
        `with rateLimit ` +
        `{ max: ${fmtInt(k.limit.max)}, durationMs: ${fmtInt(k.limit.durationMs)} } on every key (never binds), with ` +
        `globalRateLimit { max: ${fmtInt(UNREACHED_GLOBAL_LIMITS.globalRateLimit.max)}, durationMs: ` +
        `${fmtInt(UNREACHED_GLOBAL_LIMITS.globalRateLimit.durationMs)} } and globalConcurrency ` +
        `${fmtInt(UNREACHED_GLOBAL_LIMITS.globalConcurrency)} (never bind), and without either; sliceSize ${k.sliceSize}, so every ` +
        `slice is full and slices = ids / ${k.sliceSize}; INFO commandstats reset after the push, read once every id is processed.`,
      columns: [
        { key: 'part', label: 'part' },
        { key: 'figure', label: 'figure' },
        { key: 'on', label: 'with flow control' },
        { key: 'global', label: 'batcher-wide limits (part 3)' },
        { key: 'off', label: 'control' },
      ],
      rows: [
        row(part1, 'other keys ids/s in the window', int(othersRate(acc.limited)), int(othersRate(acc.control))),
        row(part1, `limited key ids/s (limit ${fmtInt(limitPerSec)}/s)`, int(acc.rate), null),
        row(part1, `most limited ids claimed in any ${windowLabel} (Redis log)`, int(acc.busiestClaims), null),
        row(part1, `most limited ids whose handler call started in any ${windowLabel}`, int(acc.busiestStarts), null),
        row(part1, 'longest pause between limited slices, ms', int(acc.longestPauseMs), null),
        row(
          part1,
          'light p50 / p99 ms',
          `${fixed(acc.limited.light?.p50, 1)} / ${lightP99(acc.limited)}`,
          `${fixed(acc.control.light?.p50, 1)} / ${lightP99(acc.control)}`,
        ),
        row(part2, 'other keys ids/s in the window', int(othersRate(ret.retrying)), int(othersRate(ret.control))),
        row(
          part2,
          'worker-slot utilisation in the window',
          fixed(ret.retrying.window.utilisation, 3),
          fixed(ret.control.window.utilisation, 3),
        ),
        row(part2, 'retrying key: ids processed, last one at', done(ret.retrying), done(ret.control)),
        costRow('drain ids/s', (c) => int(c?.idsPerSec)),
        costRow('Redis µs (scripts) per 100 ids', (c) => fixed(c?.scriptUsec, 1)),
        costRow('Redis CPU µs per 100 ids', (c) => fixed(c?.redisCpu, 1)),
        costRow("commands per slice (scripts' included)", (c) => fixed(c?.commandsPerSlice, 1)),
        costRow('script calls per slice', (c) => fixed(c?.scriptCallsPerSlice, 2)),
      ],
      ratios,
      notes: [
        `limited key ids/s: each handler call's ids spread over the ${windowLabel} after it started, averaged over the window, so ` +
          `whether the window's edges fall just before or after one of the key's bursts does not count; counted as points it is ` +
          `${fmtInt(acc.pointRate)}`,
        "the limit holds on claims, by the Redis clock (the key's rate-limit log, read every 100 ms); a handler call starts a little " +
          'after its claim, by an amount that varies, so its starts can crowd one more slice into a window',
        `a limited or retrying key waits without a worker slot, then its job queues for one like any other: a pause between limited ` +
          `slices longer than ${windowLabel} is time spent in that queue`,
        'Redis µs (scripts): INFO commandstats usec of EVALSHA, EVAL and FCALL, the commands the scripts run included (every claim is a ' +
          'script); commands per 100 ids counts those inner commands too',
        "a limited claim reads the key's whole rate-limit log, one entry per claim of the last durationMs, so what a limit adds grows " +
          'with the slices a key claims per window: ' +
          'a key drained alone claims more of them than these keys, which share the slots',
        ...(acc.busiestClaims === null
          ? [`the rate-limit log was read less often than every ${windowLabel}: its busiest window is unknown`]
          : []),
        ...(drained.length ? ['other keys ids/s is — where they ran out of ids inside the window'] : []),
      ],
      details: {
        accuracy: acc,
        retry: ret,
        cost: { on: cst.on, global: cst.global, off: cst.off, perHundredIds: { on, global, off } },
      },
    };
  },
};
