import { Cluster, Redis } from 'ioredis';
import { batchByKey, WORKER_DEFAULTS, type Batcher } from '../../src';
import { startCluster, type LocalCluster } from '../../tools/redis-cluster';
import { pollUntil, sleep, spin, withTimeout } from '../lib/clock';
import { percentile, ratio } from '../lib/stats';
import { fmtInt, progress } from './common';
import type { Config } from '../config';
import type { Cell, Scenario } from './types';

type Plan = Config['clusterShards'];

/** What one master did over a phase: commands executed (INFO commandstats, scripts' commands included) and CPU. */
interface MasterWork {
  port: number;
  commands: number;
  cpuMs: number;
}

/** One phase's per-master work and how it splits. */
interface Split {
  masters: MasterWork[];
  /** The busiest master's commands over the mean of all masters (1 = even; 3 = one master of three did it all). */
  busiestOverMean: number;
  /** The busiest master's share of all commands. */
  busiestShare: number;
  cpuBusiestOverMean: number;
}

interface ShardsRun {
  shards: number;
  smallKeys: Split & { keysPerSec: number };
  stream: Split & { p99Ms: number; processed: number; pushed: number };
  idle: { commandsPerSec: number };
  light: { p99Ms: number; p50Ms: number; samples: number };
}

const parse = (text: string): Record<string, string> =>
  Object.fromEntries(
    text
      .split('\r\n')
      .filter((l) => l.includes(':') && !l.startsWith('#'))
      .map((l) => [l.slice(0, l.indexOf(':')), l.slice(l.indexOf(':') + 1)]),
  );

/** Commands executed and CPU ms of a master so far (the bench's own INFO calls left out). */
async function readMaster(node: Redis): Promise<{ commands: number; cpuMs: number }> {
  const stats = parse(await node.info('commandstats'));
  let commands = 0;
  for (const [field, value] of Object.entries(stats)) {
    if (!field.startsWith('cmdstat_') || /^cmdstat_(info|config\|.*|cluster\|.*)$/.test(field)) continue;
    commands += Number(/calls=(\d+)/.exec(value)?.[1] ?? 0);
  }
  const cpu = parse(await node.info('cpu'));
  return { commands, cpuMs: (Number(cpu.used_cpu_user) + Number(cpu.used_cpu_sys)) * 1000 };
}

/** Measures what each master does while `work` runs. */
async function perMaster(masters: readonly Redis[], work: () => Promise<void>): Promise<Split> {
  const before = await Promise.all(masters.map(readMaster));
  await work();
  const after = await Promise.all(masters.map(readMaster));
  const work_ = masters.map((m, i) => ({
    port: m.options.port!,
    commands: after[i]!.commands - before[i]!.commands,
    cpuMs: after[i]!.cpuMs - before[i]!.cpuMs,
  }));
  const total = work_.reduce((a, m) => a + m.commands, 0);
  const mean = total / work_.length;
  const cpuMean = work_.reduce((a, m) => a + m.cpuMs, 0) / work_.length;
  const busiest = Math.max(...work_.map((m) => m.commands));
  return {
    masters: work_,
    busiestOverMean: busiest / mean,
    busiestShare: busiest / total,
    cpuBusiestOverMean: Math.max(...work_.map((m) => m.cpuMs)) / cpuMean,
  };
}

async function runShards(cluster: LocalCluster, masters: readonly Redis[], plan: Plan, shards: number): Promise<ShardsRun> {
  const connection = new Cluster(cluster.nodes, { redisOptions: { maxRetriesPerRequest: null } });
  const seen = new Map<string, number>();
  let processed = 0;
  let heavyCostUs = 0;
  const b: Batcher = batchByKey({
    name: `shards-${shards}-${Date.now()}`,
    connection,
    shards,
    // Short runs, so the oversubscribed phase's heavy keys take turns as they would in production.
    maxRuntimeMs: 50,
    // No history sampling: its stats() reads every key of the index each interval, which would
    // be most of the idle phase's commands (it is measured in the history scenario).
    history: false,
    eachIteration(ids, ctx) {
      if (ctx.key.startsWith('heavy-')) spin(heavyCostUs * ids.length);
      processed += ids.length;
      for (const id of ids) if (id.startsWith('t')) seen.set(id, Date.now() - Number(id.slice(1).split('.')[0]));
    },
  });
  try {
    // Many small keys: a backlog pushed first, then drained.
    for (let i = 0; i < plan.keys; i += plan.fillCallers) {
      await Promise.all(
        Array.from({ length: Math.min(plan.fillCallers, plan.keys - i) }, (_, j) =>
          b.performBatchLater(
            Array.from({ length: plan.idsPerKey }, (_, n) => `${n}`),
            { key: `small-${i + j}` },
          ),
        ),
      );
    }
    let drainMs = 0;
    const worker = b.createWorker({ concurrency: plan.concurrency });
    const smallKeys = await perMaster(masters, async () => {
      const started = Date.now();
      await withTimeout(
        pollUntil(() => processed >= plan.keys * plan.idsPerKey, plan.timeoutMs, 5),
        plan.timeoutMs + 1_000,
        `shards ${shards}: small keys`,
      );
      drainMs = Date.now() - started;
    });

    // A stream of one-id pushes to new keys, paced, with the worker running.
    const streamStart = processed;
    let pushed = 0;
    const stream = await perMaster(masters, async () => {
      const interval = 1000 / plan.streamRatePerSec;
      const start = Date.now();
      const pushes: Promise<unknown>[] = [];
      for (let n = 0; Date.now() - start < plan.streamMs; n++) {
        const due = start + n * interval;
        if (due > Date.now()) await sleep(due - Date.now());
        pushes.push(b.performBatchLater([`t${Date.now()}.${n}`], { key: `stream-${n}` }));
        pushed++;
      }
      await Promise.all(pushes);
      await pollUntil(() => processed - streamStart >= pushed, plan.timeoutMs, 5);
    });
    const latencies = [...seen.values()].sort((a, z) => a - z);
    seen.clear();

    // Idle: the worker watches every shard's queue, nothing to do.
    const idleBefore = await Promise.all(masters.map(readMaster));
    await sleep(plan.idleMs);
    const idleAfter = await Promise.all(masters.map(readMaster));
    const idleCommands = idleAfter.reduce((a, m, i) => a + m.commands - idleBefore[i]!.commands, 0);

    // Oversubscribed: more heavy keys than slots, light keys pushed meanwhile; their latency.
    heavyCostUs = plan.heavyCostUs;
    for (let k = 0; k < plan.heavyKeys; k++) {
      await b.performBatchLater(
        Array.from({ length: plan.idsPerHeavyKey }, (_, n) => `h${n}`),
        { key: `heavy-${k}` },
      );
    }
    await sleep(plan.lightEveryMs * 5);
    for (let n = 0; n < plan.lightPushes; n++) {
      await b.performBatchLater([`t${Date.now()}.${n}`], { key: `light-${n}` });
      await sleep(plan.lightEveryMs);
    }
    await pollUntil(() => seen.size >= plan.lightPushes, plan.timeoutMs, 5);
    const light = [...seen.values()].sort((a, z) => a - z);
    await worker.close(true);
    return {
      shards,
      smallKeys: { ...smallKeys, keysPerSec: (plan.keys / drainMs) * 1000 },
      stream: { ...stream, p99Ms: percentile(latencies, 99), processed: processed - streamStart, pushed },
      idle: { commandsPerSec: (idleCommands / plan.idleMs) * 1000 },
      light: { p99Ms: percentile(light, 99), p50Ms: percentile(light, 50), samples: light.length },
    };
  } finally {
    await b.close();
    connection.disconnect();
  }
}

const fmtShares = (split: Split) => split.masters.map((m) => fmtInt(m.commands)).join(' / ');

/**
 * One batcher on a 3-master Redis Cluster with `shards` 1, 2 and 3: how its Redis work splits over
 * the masters (with one queue, one master carries every job command), what the worker costs idle,
 * and the light keys' latency under oversubscription. The machine's 2 cores run the three masters
 * and the bench, so throughput cannot scale here: the keys/s column is for machines with more.
 */
export const clusterShards: Scenario = {
  id: 'cluster-shards',
  async run(config) {
    const plan = config.clusterShards;
    const cluster = await startCluster({ masters: 3, replicasPerMaster: 0 });
    const masters = cluster.nodes.map((node) => new Redis({ ...node, maxRetriesPerRequest: null }));
    const runs: ShardsRun[] = [];
    try {
      for (const shards of plan.shardCounts) {
        progress(`shards ${shards}: ${fmtInt(plan.keys)} small keys, a ${fmtInt(plan.streamRatePerSec)}/s stream, idle, oversubscribed`);
        runs.push(await runShards(cluster, masters, plan, shards));
      }
    } finally {
      for (const m of masters) m.disconnect();
      await cluster.stop();
    }
    const one = runs.find((r) => r.shards === 1);
    const most = runs[runs.length - 1];
    const rows: Record<string, Cell>[] = runs.map((r) => ({
      shards: r.shards,
      smallPerMaster: fmtShares(r.smallKeys),
      smallBusiest: r.smallKeys.busiestOverMean,
      smallShare: r.smallKeys.busiestShare * 100,
      smallCpu: r.smallKeys.cpuBusiestOverMean,
      keysPerSec: r.smallKeys.keysPerSec,
      streamBusiest: r.stream.busiestOverMean,
      streamShare: r.stream.busiestShare * 100,
      streamP99: r.stream.p99Ms,
      idle: r.idle.commandsPerSec,
      lightP99: r.light.p99Ms,
    }));
    return {
      id: 'cluster-shards',
      title: 'One batcher over a 3-master Redis Cluster: shards',
      setup:
        `A local Redis Cluster of 3 masters (no replicas); one process pushes and runs 1 worker, concurrency ${plan.concurrency}, ` +
        `empty handler. Per shards value: ${fmtInt(plan.keys)} keys × ${plan.idsPerKey} ids pushed (${plan.fillCallers} callers), then ` +
        `drained; a stream of one-id pushes to new keys at ${fmtInt(plan.streamRatePerSec)}/s for ${plan.streamMs} ms; ${plan.idleMs} ms ` +
        `idle; ${plan.heavyKeys} heavy keys × ${fmtInt(plan.idsPerHeavyKey)} ids (${plan.heavyCostUs} µs an id, maxRuntimeMs 50) with ` +
        `${plan.lightPushes} light one-id keys pushed every ${plan.lightEveryMs} ms. Commands: INFO commandstats calls per master ` +
        '(scripts and the commands they run); CPU: INFO cpu per master. The 2-core machine runs the masters and the bench: keys/s ' +
        'cannot scale with masters here.',
      columns: [
        { key: 'shards', label: 'shards' },
        { key: 'smallPerMaster', label: 'small keys: commands per master' },
        { key: 'smallBusiest', label: 'busiest / mean (commands)', digits: 2 },
        { key: 'smallShare', label: 'busiest share %', digits: 0 },
        { key: 'smallCpu', label: 'busiest / mean (CPU)', digits: 2 },
        { key: 'keysPerSec', label: 'keys/s' },
        { key: 'streamBusiest', label: 'stream: busiest / mean', digits: 2 },
        { key: 'streamShare', label: 'stream: busiest share %', digits: 0 },
        { key: 'streamP99', label: 'stream p99 ms', digits: 1 },
        { key: 'idle', label: 'idle commands/s', digits: 1 },
        { key: 'lightP99', label: 'light p99 ms (oversubscribed)', digits: 1 },
      ],
      rows,
      ratios: [
        { name: 'small keys: busiest master / mean, shards 1', value: one?.smallKeys.busiestOverMean ?? null },
        {
          name: `small keys: busiest master / mean, shards ${most?.shards}`,
          value: most?.smallKeys.busiestOverMean ?? null,
          target: '<= 1.25',
        },
        { name: `stream: busiest master / mean, shards ${most?.shards}`, value: most?.stream.busiestOverMean ?? null, target: '<= 1.25' },
        {
          name: `light p99: shards ${most?.shards} / shards 1`,
          value: ratio(most?.light.p99Ms, one?.light.p99Ms),
          target: '<= 1.25',
        },
        { name: `idle commands/s: shards ${most?.shards} / shards 1`, value: ratio(most?.idle.commandsPerSec, one?.idle.commandsPerSec) },
      ],
      notes: [
        'Busiest / mean is 3.00 when one master of three does everything and 1.00 when they share evenly. With shards 1, the master of ' +
          "the batcher's queue tag takes every job command (add, fetch, completion, the stalled check) and the recovery index; per-key " +
          'data is spread over all three either way',
        'Idle: what the worker sends while every queue is empty (history sampling off): per shard, a blocking fetch per drainDelay ' +
          `(5 s; INFO counts it when it ends) and a stalled-job check per stalledInterval (${WORKER_DEFAULTS.stalledInterval / 1000} s, ` +
          "createWorker's default), plus BullMQ's lock renewals and " +
          'the recovery and aging sweeps',
      ],
      details: runs,
    };
  },
};
