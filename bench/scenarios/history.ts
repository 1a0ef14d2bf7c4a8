import { EventEmitter } from 'node:events';
import type { Worker } from 'bullmq';
import { Redis } from 'ioredis';
import { batchByKey, type Batcher } from '../../src';
import { encodeSample, HistorySampler } from '../../src/ops/history';
import { HISTORY_DEFAULTS, samplesKept, type ResolvedHistory } from '../../src/ops/history-options';
import { Keyspace } from '../../src/storage/keys';
import { defineScripts, runScript } from '../../src/storage/scripts';
import { sleep, withTimeout } from '../lib/clock';
import { withFreshRedis, type BenchRedis } from '../lib/redis';
import { readSlowlog, startSlowlog } from '../lib/slowlog';
import { ratio } from '../lib/stats';
import type { Config } from '../config';
import { redisOptions } from '../systems/shared';
import { fmtInt, progress } from './common';
import type { Scenario } from './types';

const PREFIX = 'bull';
/** The defaults: an hour of samples 10 s apart. */
const HOUR: ResolvedHistory = { ...HISTORY_DEFAULTS };
/** A sample's ids per second, counted by each fake process between its ticks. */
const IDS_PER_TICK = 100;

interface Measured {
  keys: number;
  processes: number;
  intervals: number;
  samples: number;
  /** Commands clients sent over the run, by name (scripts by theirs). */
  commands: Record<string, number>;
  tickCalls: number;
  appendCalls: number;
  /** Commands of the samples' stats() reads. */
  statsCommands: number;
  redisUsec: number;
  /** An hour of samples, per `topKeys`. */
  memory: Memory[];
}

interface Memory {
  topKeys: number;
  seriesBytes: number;
  claimBytes: number;
  processedBytes: number;
  usedMemoryDelta: number;
  entryChars: number;
  samples: number;
}

/** The default, and the totals alone. */
const TOP_KEYS = [HISTORY_DEFAULTS.topKeys, 0];

/** Keys with a backlog each, named like accounts, so a sample's top keys are as long as real ones. */
async function fill(b: Batcher, keys: number): Promise<void> {
  for (let i = 0; i < keys; i++) {
    await b.performBatchLater(
      Array.from({ length: 1 + (i % 50) }, (_, n) => `id-${n}`),
      { key: `account-${100_000 + i}` },
    );
  }
}

/**
 * The real sampler, `processes` of them as if in as many worker processes (each its own
 * connection), on their own timers for `intervals` intervals; SLOWLOG counts what they send.
 */
async function cost(
  redis: BenchRedis,
  b: Batcher,
  name: string,
  c: Config['history'],
  options: ResolvedHistory,
): Promise<Omit<Measured, 'memory' | 'keys'>> {
  const names = new Keyspace(PREFIX, name).history;
  const clients = Array.from({ length: c.processes }, () => new Redis(redisOptions(redis.url)));
  const counters: ((ids: number) => void)[] = [];
  const samplers = clients.map((client) => {
    defineScripts(client);
    return new HistorySampler({
      client: () => client,
      names,
      options,
      stats: (o) => b.stats(o),
      onProcessed: (count) => {
        counters.push(count);
        return () => undefined;
      },
      logger: console,
    });
  });
  try {
    // Each connection's first call of a script sends its body (EVAL), or loads the library: out of the measurement.
    for (const sampler of samplers) await sampler.tick();
    await b.stats();
    const before = await redis.admin.llen(names.series);
    await startSlowlog(redis);
    const workers = samplers.map((sampler) => {
      const worker = new EventEmitter();
      sampler.track(worker as unknown as Worker);
      return worker;
    });
    const feeding = setInterval(() => counters.forEach((count) => count(IDS_PER_TICK)), options.intervalMs);
    // A timer's first tick is one interval after it starts: half an interval more sees the last one.
    await sleep((c.intervals + 0.5) * options.intervalMs);
    for (const worker of workers) worker.emit('closed');
    clearInterval(feeding);
    // A sample whose stats() read was under way when the timers stopped lands now.
    await sleep(Math.min(1_000, options.intervalMs * 2));
    const profile = await readSlowlog(redis);
    const commands = Object.fromEntries(profile.commands.map((p) => [p.command, p.calls]));
    const calls = (script: string) => commands[`bbk ${script}`] ?? 0;
    const samples = (await redis.admin.llen(names.series)) - before;
    return {
      processes: c.processes,
      intervals: c.intervals,
      samples,
      commands,
      tickCalls: calls('history-tick'),
      appendCalls: calls('history-append'),
      statsCommands: profile.roundTrips - calls('history-tick') - calls('history-append'),
      redisUsec: profile.usec,
    };
  } finally {
    await Promise.all(clients.map((client) => client.quit()));
  }
}

/** An hour of samples (`retentionMs / intervalMs` at the default 10 s) through the real encoding and script, then MEMORY USAGE. */
async function memory(redis: BenchRedis, b: Batcher, name: string, topKeys: number): Promise<Memory> {
  const hour = HOUR;
  const samples = samplesKept(hour);
  const names = new Keyspace(PREFIX, `${name}-hour-${topKeys}`).history;
  const client = new Redis(redisOptions(redis.url));
  try {
    defineScripts(client);
    const stats = await b.stats({ top: Math.max(1, topKeys) });
    const usedBefore = await redis.usedMemory();
    let chars = 0;
    const start = stats.at - samples * hour.intervalMs;
    for (let i = 0; i < samples; i++) {
      // Real figures would vary; these are as long as real ones (13-digit times, 6-digit counts).
      const entry = encodeSample(start + i * hour.intervalMs, 100_000 + i * 950, stats, topKeys);
      chars += entry.length;
      await runScript(client, 'history-append', [names.series], [entry, hour.intervalMs, samples, hour.retentionMs]);
    }
    // The tick's two small keys, at their usual sizes.
    await runScript(client, 'history-tick', [names.claim, names.processed], [950, hour.intervalMs, hour.retentionMs]);
    const usage = async (key: string) => Number(await redis.admin.call('MEMORY', 'USAGE', key, 'SAMPLES', '0'));
    return {
      topKeys,
      seriesBytes: await usage(names.series),
      claimBytes: await usage(names.claim),
      processedBytes: await usage(names.processed),
      usedMemoryDelta: (await redis.usedMemory()) - usedBefore,
      entryChars: chars / samples,
      samples: await redis.admin.llen(names.series),
    };
  } finally {
    await client.quit();
  }
}

/**
 * What the history costs: Redis calls and time per interval with several worker processes sampling
 * (one sample per interval whatever their number), and the memory of an hour of samples.
 */
export const history: Scenario = {
  id: 'history',
  async run(config) {
    const c = config.history;
    const options: ResolvedHistory = { ...HOUR, intervalMs: c.intervalMs, retentionMs: c.intervalMs * samplesKept(HOUR) };
    progress(`${c.processes} samplers, ${c.intervals} intervals of ${c.intervalMs} ms, ${fmtInt(c.keys)} keys`);
    const m: Measured = await withFreshRedis((redis) =>
      withTimeout(
        (async () => {
          const name = 'bench-history';
          const b = batchByKey({ name, connection: redis.url, prefix: PREFIX, history: false });
          try {
            await fill(b, c.keys);
            const measured = await cost(redis, b, name, c, options);
            const hours: Memory[] = [];
            for (const top of TOP_KEYS) hours.push(await memory(redis, b, name, top));
            return { keys: c.keys, ...measured, memory: hours };
          } finally {
            await b.close();
          }
        })(),
        c.timeoutMs,
        'history',
      ),
    );
    // The run's figures sit on the default's row; the other rows differ only in what a sample holds.
    const rows = m.memory.map((mem, i) => ({
      topKeys: mem.topKeys,
      keys: m.keys,
      processes: i === 0 ? m.processes : null,
      intervals: i === 0 ? m.intervals : null,
      samples: i === 0 ? m.samples : null,
      tick: i === 0 ? ratio(m.tickCalls, m.processes * m.intervals) : null,
      perSample: i === 0 ? ratio(m.statsCommands + m.appendCalls, m.samples) : null,
      usec: i === 0 ? ratio(m.redisUsec, m.intervals) : null,
      entry: mem.entryChars,
      bytesPerSample: mem.seriesBytes / mem.samples,
      perHour: mem.seriesBytes + mem.claimBytes + mem.processedBytes,
    }));
    return {
      id: 'history',
      title: 'History sampling',
      setup:
        `${fmtInt(c.keys)} keys with ids; ${c.processes} samplers (the library's, each on its own connection, as in ${c.processes} ` +
        `worker processes) on their own timers for ${c.intervals} intervals of ${c.intervalMs} ms, SLOWLOG on. ` +
        `Then ${samplesKept(HOUR)} samples (an hour at the default 10 s) of the same stats() appended by the sampler's encoding and ` +
        `script, with topKeys ${TOP_KEYS.join(' and ')}; MEMORY USAGE of the series and the tick's two keys.`,
      columns: [
        { key: 'topKeys', label: 'topKeys' },
        { key: 'keys', label: 'keys' },
        { key: 'processes', label: 'processes' },
        { key: 'intervals', label: 'intervals' },
        { key: 'samples', label: 'samples taken' },
        { key: 'tick', label: 'calls per process per interval', digits: 2 },
        { key: 'perSample', label: 'commands per sample (stats + append)', digits: 1 },
        { key: 'usec', label: 'Redis µs per interval', digits: 0 },
        { key: 'entry', label: 'chars per sample', digits: 0 },
        { key: 'bytesPerSample', label: 'Redis bytes per sample', digits: 1 },
        { key: 'perHour', label: 'Redis bytes per hour (360 samples)' },
      ],
      rows,
      ratios: [
        {
          name: 'samples taken / intervals',
          value: ratio(m.samples, m.intervals),
          target: '~1 (one per interval, whatever the processes)',
        },
        { name: 'history-tick calls per process per interval', value: ratio(m.tickCalls, m.processes * m.intervals), target: '~1' },
      ],
      notes: [
        "a sample's top keys are the topKeys with the most ids waiting and as many laggiest, merged (here up to 10 keys named like " +
          'account-100042); longer key names make a sample longer',
        'commands per sample count each command a stats() read pipelines (per key: sizes, retry slices, oldest mark, lanes); a process ' +
          'that does not sample sends only its tick',
      ],
      details: m,
    };
  },
};
