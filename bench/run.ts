/**
 * `npm run bench` (full, about 12-13 minutes on 2 cores) or `npm run bench -- --quick` (small sizes,
 * about 110 s; what CI runs so the bench never rots). `--only=drain,enqueue` (or `--only drain,enqueue`)
 * runs some scenarios.
 * Starts a throwaway redis-server per measurement, or uses REDIS_URL (FLUSHALL before each).
 * Prints markdown tables and writes results.json and latency.svg beside this file
 * (results.quick.json / latency.quick.svg in quick mode and *.partial.* with --only, so neither
 * replaces the figures of the last full run).
 */
import { join } from 'node:path';
import { CONFIGS, type Mode } from './config';
import { withTimeout } from './lib/clock';
import { machineInfo } from './lib/machine';
import { RedisNotInstalledError } from '../tools/redis-server';
import { markdown, writeResults, type Results } from './report';
import { controllerJump } from './scenarios/controller-jump';
import { clusterShards } from './scenarios/cluster-shards';
import { cycleCost } from './scenarios/cycle-cost';
import { dataMemory } from './scenarios/data-memory';
import { drain } from './scenarios/drain';
import { enqueue } from './scenarios/enqueue';
import { history } from './scenarios/history';
import { keyMemory } from './scenarios/key-memory';
import { memory } from './scenarios/memory';
import { noisyNeighbour, TARGET_P99_MS } from './scenarios/noisy-neighbour';
import { oneIdKeys } from './scenarios/one-id-keys';
import { oversubscribed } from './scenarios/oversubscribed';
import { profile } from './scenarios/profile';
import { pushTracing } from './scenarios/push-tracing';
import { rateLimit } from './scenarios/rate-limit';
import { scaleOut } from './scenarios/scale-out';
import { scriptMicro } from './scenarios/script-micro';
import { smallKeys } from './scenarios/small-keys';
import { splitFlood } from './scenarios/split-flood';
import { stream } from './scenarios/stream';
import { waitToFill } from './scenarios/wait-to-fill';
import type { Scenario, ScenarioResult } from './scenarios/types';
import { writeLatencySvg } from './svg';

const SCENARIOS: readonly Scenario[] = [
  drain,
  enqueue,
  noisyNeighbour,
  oversubscribed,
  splitFlood,
  memory,
  dataMemory,
  keyMemory,
  scaleOut,
  profile,
  // Many accounts, small frequent pushes.
  smallKeys,
  oneIdKeys,
  stream,
  // The same stream with wait to fill (minSliceSize, maxWaitMs).
  waitToFill,
  cycleCost,
  // The hot scripts one at a time: µs per call, and what each pays before its first statement of work.
  scriptMicro,
  // What tracePushes costs a push: off, on without a provider, unsampled and sampled.
  pushTracing,
  // A controller that pushes, under a sudden jump in load.
  controllerJump,
  // Flow control: rateLimit and retryAfter.
  rateLimit,
  // What the dashboard's history costs Redis.
  history,
  // One batcher over a 3-master Cluster: how its work splits per shards value.
  clusterShards,
];

/** A scenario past this is broken, not slow (each run inside has its own, shorter deadline). */
const SCENARIO_DEADLINE_MS: Record<Mode, number> = { quick: 90_000, full: 300_000 };

function parseArgs(argv: readonly string[]): { mode: Mode; only: Set<string> | undefined } {
  let mode: Mode = 'full';
  let only: Set<string> | undefined;
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]!;
    if (arg === '--quick') mode = 'quick';
    else if (arg.startsWith('--only=')) only = new Set(arg.slice('--only='.length).split(','));
    else if (arg === '--only' && argv[i + 1] !== undefined) only = new Set(argv[++i]!.split(','));
    else throw new Error(`unknown argument ${arg}; use --quick and/or --only=${SCENARIOS.map((s) => s.id).join(',')}`);
  }
  for (const id of only ?? []) if (!SCENARIOS.some((s) => s.id === id)) throw new Error(`no scenario ${id}`);
  return { mode, only };
}

async function main(): Promise<void> {
  const { mode, only } = parseArgs(process.argv.slice(2));
  const config = CONFIGS[mode];
  const started = Date.now();
  const machine = await machineInfo();
  console.log(`batch-by-key bench, ${mode} mode: ${machine.cpu}, ${machine.cores} cores, Node ${machine.node}, Redis ${machine.redis}`);

  const scenarios: ScenarioResult[] = [];
  for (const scenario of SCENARIOS.filter((s) => !only || only.has(s.id))) {
    const t0 = Date.now();
    console.log(`${scenario.id}:`);
    scenarios.push(await withTimeout(scenario.run(config), SCENARIO_DEADLINE_MS[mode], `scenario ${scenario.id}`));
    console.log(`  ${scenario.id} took ${((Date.now() - t0) / 1000).toFixed(1)} s`);
  }

  const results: Results = {
    mode,
    startedAt: new Date(started).toISOString(),
    durationSec: (Date.now() - started) / 1000,
    // As typed: "npm run bench", "npm run bench -- --quick", "npm run bench -- --quick --only=drain".
    command: `npm run bench${process.argv.length > 2 ? ` -- ${process.argv.slice(2).join(' ')}` : ''}`,
    machine,
    config,
    scenarios,
  };
  // Only a complete full run writes the committed results.json and latency.svg.
  const suffix = `${mode === 'quick' ? '.quick' : ''}${only ? '.partial' : ''}`;
  console.log('\n' + markdown(results));
  writeResults(join(__dirname, `results${suffix}.json`), results);
  const noisy = scenarios.find((s) => s.id === 'noisy-neighbour');
  if (noisy)
    writeLatencySvg(
      join(__dirname, `latency${suffix}.svg`),
      noisy,
      `${mode} run, ${machine.cores} cores (${machine.cpu}), ${results.startedAt.slice(0, 10)}`,
      TARGET_P99_MS,
    );
  console.log(`wrote bench/results${suffix}.json${noisy ? ` and bench/latency${suffix}.svg` : ''} in ${results.durationSec.toFixed(0)} s`);
}

main().then(
  () => process.exit(0),
  (err: unknown) => {
    console.error(err instanceof RedisNotInstalledError ? err.message : err);
    process.exit(1);
  },
);
