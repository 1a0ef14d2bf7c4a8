import { fork } from 'node:child_process';
import { Agent, request } from 'node:http';
import { join } from 'node:path';
import { systemFor, type SystemSpec } from '../systems';
import { WorkerPool } from '../worker/host';
import type { FromServer, ServerSpec, ToServer } from '../worker/server';
import { now, pollUntil, seededRandom, sleep, withTimeout } from '../lib/clock';
import { newTarget } from '../lib/fill';
import { withFreshRedis } from '../lib/redis';
import { ratio, summarize } from '../lib/stats';
import type { Config } from '../config';
import { fmtInt, progress } from './common';
import type { Scenario } from './types';

const SYSTEMS: readonly SystemSpec[] = [{ id: 'ours' }, { id: 'bullmq-per-id' }];
const SERVER = join(__dirname, '..', 'worker', 'server.ts');
/** Keep-alive connections the load generator opens to the controller, at most. */
const CONNECTIONS = 256;
/** Accounts the requests are drawn from, with a Zipf skew (a few busy accounts, a long tail). */
const ACCOUNTS = 2_000;
const ZIPF_S = 1.0;
/** The load generator sends what is due every this many ms (open loop: a request's latency counts from when it was due). */
const TICK_MS = 2;
/** After the last request, how long processed ids may still come in before the rest count as lost. */
const GRACE_MS = 5_000;

interface Phase {
  name: string;
  ratePerSec: number;
  ms: number;
}

interface Served {
  system: string;
  /** HTTP latency (due → response) p99 by window, ms. */
  http: Record<string, number>;
  server: Record<string, Extract<FromServer, { type: 'window' }>>;
  /** From the request's due time to the id's handler call, over the whole run. */
  processedP99: number;
  requests: number;
  ids: number;
  lost: number;
  duplicates: number;
  failedRequests: number;
}

/** A Zipf-distributed account picker over ACCOUNTS accounts. */
function zipf(random: () => number): () => string {
  const weights = Array.from({ length: ACCOUNTS }, (_, i) => 1 / (i + 1) ** ZIPF_S);
  const total = weights.reduce((a, b) => a + b, 0);
  const cumulative: number[] = [];
  let sum = 0;
  for (const w of weights) cumulative.push((sum += w / total));
  return () => {
    const r = random();
    let lo = 0;
    let hi = cumulative.length - 1;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (cumulative[mid]! < r) lo = mid + 1;
      else hi = mid;
    }
    return `acct-${lo}`;
  };
}

async function runOne(spec: SystemSpec, phases: readonly Phase[]): Promise<Served> {
  const system = systemFor(spec);
  return withFreshRedis(async (redis) => {
    const target = newTarget(redis);
    const pool = await WorkerPool.fork(1, { system: spec, target, concurrency: 16, costPerIdUs: 0, lightPrefix: '' });
    const server = fork(SERVER, [], {
      execArgv: ['--import', 'tsx'],
      env: { ...process.env, BENCH_SERVER_SPEC: JSON.stringify({ system: spec, target } satisfies ServerSpec) },
      stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
    });
    const windows: Record<string, Extract<FromServer, { type: 'window' }>> = {};
    const port = await withTimeout(
      new Promise<number>((resolve) => server.on('message', (m: FromServer) => m.type === 'ready' && resolve(m.port))),
      20_000,
      `${system.label} controller start`,
    );
    server.on('message', (m: FromServer) => {
      if (m.type === 'window') windows[m.name] = m;
    });
    const closeWindow = async (name: string) => {
      server.send({ type: 'window', name } satisfies ToServer);
      await pollUntil(() => windows[name] !== undefined, 10_000);
    };
    const agent = new Agent({ keepAlive: true, maxSockets: CONNECTIONS });
    const random = seededRandom(7);
    const account = zipf(random);
    const dueAt = new Map<string, number>();
    const latencies: Record<string, number[]> = {};
    let failedRequests = 0;
    let sent = 0;
    const inFlight = new Set<Promise<void>>();
    const send = (window: string, due: number) => {
      const n = 1 + Math.floor(random() * 5);
      const ids = Array.from({ length: n }, (_, j) => `${sent}-${j}`);
      sent++;
      for (const id of ids) dueAt.set(id, due);
      const body = JSON.stringify({ key: account(), ids });
      const done = new Promise<void>((resolve) => {
        const req = request(
          { agent, host: '127.0.0.1', port, path: '/push', method: 'POST', headers: { 'content-type': 'application/json' } },
          (res) => {
            res.resume();
            res.on('end', () => {
              if (res.statusCode !== 204) failedRequests++;
              (latencies[window] ??= []).push(now() - due);
              resolve();
            });
          },
        );
        req.on('error', () => {
          failedRequests++;
          resolve();
        });
        req.end(body);
      });
      inFlight.add(done);
      void done.then(() => inFlight.delete(done));
    };
    try {
      pool.start();
      for (const phase of phases) {
        const start = now();
        let i = 0;
        const total = Math.round((phase.ratePerSec * phase.ms) / 1000);
        while (i < total) {
          const t = now();
          // A phase's first second is a window of its own: where a jump shows.
          while (i < total && start + (i * 1000) / phase.ratePerSec <= t) {
            const due = start + (i * 1000) / phase.ratePerSec;
            send(due - start < 1000 ? `${phase.name}, 1st s` : `${phase.name}, rest`, due);
            i++;
          }
          if (i < total) await sleep(TICK_MS);
          if (now() - start >= 1000 && !windows[`${phase.name}, 1st s`]) await closeWindow(`${phase.name}, 1st s`);
        }
        await Promise.all([...inFlight]);
        if (!windows[`${phase.name}, 1st s`]) await closeWindow(`${phase.name}, 1st s`);
        await closeWindow(`${phase.name}, rest`);
      }
      const ids = dueAt.size;
      await pool.waitProcessed(ids, GRACE_MS);
      const seen = new Map<string, number>();
      let duplicates = 0;
      const processedLatency: number[] = [];
      for (const [id, at] of pool.light) {
        if (seen.has(id)) duplicates++;
        else {
          seen.set(id, at);
          const due = dueAt.get(id);
          if (due !== undefined) processedLatency.push(at - due);
        }
      }
      const http: Record<string, number> = {};
      for (const [window, values] of Object.entries(latencies)) http[window] = summarize(values).p99;
      return {
        system: system.label,
        http,
        server: windows,
        processedP99: summarize(processedLatency).p99,
        requests: sent,
        ids,
        lost: ids - seen.size,
        duplicates,
        failedRequests,
      };
    } finally {
      agent.destroy();
      server.send({ type: 'stop' } satisfies ToServer);
      await withTimeout(new Promise((resolve) => server.once('exit', resolve)), 10_000, 'controller stop').catch(() =>
        server.kill('SIGKILL'),
      );
      await pool.stop();
    }
  });
}

/**
 * A web app's controller under open-loop HTTP load (keep-alive connections, accounts with a Zipf
 * skew, 1–5 ids a request), warm at a low rate, then a sudden jump to ten times that: a deploy, a
 * retry storm, a marketing email. performBatchLater beside BullMQ's own add, from the same
 * controller, each with one worker process.
 */
export const controllerJump: Scenario = {
  id: 'controller-jump',
  async run(config: Config) {
    const c = config.controllerJump;
    const phases: Phase[] = [
      { name: `warm ${fmtInt(c.lowRate)}/s`, ratePerSec: c.lowRate, ms: c.warmMs },
      { name: `jump to ${fmtInt(c.highRate)}/s`, ratePerSec: c.highRate, ms: c.jumpMs },
      { name: `steady ${fmtInt(c.highRate)}/s`, ratePerSec: c.highRate, ms: c.steadyMs },
    ];
    const results: Served[] = [];
    for (const spec of SYSTEMS) {
      progress(`${systemFor(spec).label}: ${phases.map((p) => `${p.name} for ${fmtInt(p.ms)} ms`).join(', ')}`);
      results.push(await runOne(spec, phases));
    }
    const [ours, bullmq] = results;
    const windowNames = phases.flatMap((p) => [`${p.name}, 1st s`, `${p.name}, rest`]);
    const jumpFirst = `${phases[1]!.name}, 1st s`;
    return {
      id: 'controller-jump',
      title: 'A controller that pushes, under a sudden jump in load',
      setup:
        `An Express controller in a process of its own (POST /push: the request's 1–5 ids for its account, pushed with ` +
        `performBatchLater or, for bullmq-per-id, BullMQ's own add); open-loop HTTP load from the bench process over at most ` +
        `${CONNECTIONS} keep-alive connections, accounts drawn from ${fmtInt(ACCOUNTS)} with a Zipf skew; ` +
        `${phases.map((p) => `${p.name} for ${fmtInt(p.ms)} ms`).join(', then ')}; 1 worker process, concurrency 16, empty ` +
        `handler. HTTP latency counts from when a request was due (open loop), p99 per window (a phase's first second, then the ` +
        `rest); push: the controller's time in the push call; loop: the controller's longest event-loop block in the window.`,
      columns: [
        { key: 'system', label: 'system' },
        { key: 'window', label: 'window' },
        { key: 'http', label: 'HTTP p99 ms', digits: 1 },
        { key: 'push', label: 'push p99 ms', digits: 1 },
        { key: 'pushMax', label: 'push max ms', digits: 1 },
        { key: 'loop', label: 'loop max ms', digits: 1 },
      ],
      rows: results.flatMap((r) =>
        windowNames.map((w) => ({
          system: r.system,
          window: w,
          http: r.http[w] ?? null,
          push: r.server[w]?.pushP99 ?? null,
          pushMax: r.server[w]?.pushMax ?? null,
          loop: r.server[w]?.loopMaxMs ?? null,
        })),
      ),
      ratios: [
        {
          name: 'jump, first second: HTTP p99 ours / bullmq-per-id',
          value: ratio(ours?.http[jumpFirst], bullmq?.http[jumpFirst]),
          target: '<= 1.5',
        },
        ...windowNames
          .filter((w) => w !== jumpFirst)
          .map((w) => ({ name: `${w}: HTTP p99 ours / bullmq-per-id`, value: ratio(ours?.http[w], bullmq?.http[w]) })),
      ],
      notes: results.map(
        (r) =>
          `${r.system}: ${fmtInt(r.requests)} requests, ${fmtInt(r.ids)} ids, ${fmtInt(r.lost)} lost, ${fmtInt(r.duplicates)} duplicates, ` +
          `${fmtInt(r.failedRequests)} failed requests; pushed-to-processed p99 ${r.processedP99.toFixed(1)} ms`,
      ),
      details: results,
    };
  },
};
