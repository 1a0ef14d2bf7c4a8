/**
 * A worker process: builds one system's consumer with the scenario's handler and reports progress
 * over IPC. Consumers always run here, never in the bench process, so the producer, the timers of
 * light-key pushes and the measurement never share an event loop with the handler's CPU cost.
 */
import { now, sleep, spin } from '../lib/clock';
import { systemFor } from '../systems';
import type { Handler } from '../systems/types';
import type { FromWorker, LightSample, ToWorker, TracedSlice, WorkerSpec } from './protocol';

const PROGRESS_MS = 25;

const spec = JSON.parse(process.env.BENCH_WORKER_SPEC ?? 'null') as WorkerSpec | null;
if (!spec) throw new Error('BENCH_WORKER_SPEC is not set: this file is forked by bench/worker/host.ts');

const send = (message: FromWorker) => process.send?.(message);
let processed = 0;
let lastAt = 0;
let busyMs = 0;
let calls = 0;
const light: LightSample[] = [];
const traced: TracedSlice[] = [];
const takeLight = () => light.splice(0);
const takeTraced = () => traced.splice(0);

/** Counts a handler call that ended just now. */
function done(spec: WorkerSpec, key: string, ids: readonly string[], startedAt: number): void {
  processed += ids.length;
  calls++;
  lastAt = now();
  busyMs += lastAt - startedAt;
  if (key.startsWith(spec.lightPrefix)) for (const id of ids) light.push([id, lastAt]);
  if (spec.tracePrefix !== undefined && key.startsWith(spec.tracePrefix)) traced.push([key, ids.length, startedAt, lastAt]);
}

/** Synchronous unless the scenario models a call to another service (see WorkerSpec.sliceWaitMs). */
function handlerFor(spec: WorkerSpec): Handler {
  const waitMs = spec.sliceWaitMs ?? 0;
  if (waitMs > 0) {
    return async (key, ids) => {
      const startedAt = now();
      spin(ids.length * spec.costPerIdUs);
      await sleep(waitMs);
      done(spec, key, ids, startedAt);
    };
  }
  return (key, ids) => {
    const startedAt = now();
    spin(ids.length * spec.costPerIdUs);
    done(spec, key, ids, startedAt);
  };
}

async function main(spec: WorkerSpec): Promise<void> {
  const consumer = await systemFor(spec.system).consumer(spec.target, { concurrency: spec.concurrency, handler: handlerFor(spec) });
  const rssReady = process.memoryUsage.rss();
  let cpuAtStart = process.cpuUsage();
  let progress: NodeJS.Timeout | undefined;

  // The handler's promise is its own: a listener's return value is ignored by the emitter.
  process.on('message', (message: ToWorker) => void onMessage(message));
  async function onMessage(message: ToWorker): Promise<void> {
    if (message.type === 'start') {
      setTimeout(
        () => {
          cpuAtStart = process.cpuUsage();
          consumer.start();
          progress = setInterval(
            () => send({ type: 'progress', processed, lastAt, busyMs, light: takeLight(), traced: takeTraced() }),
            PROGRESS_MS,
          );
        },
        Math.max(0, message.at - now()),
      );
    } else {
      clearInterval(progress);
      const cpu = process.cpuUsage(cpuAtStart);
      const rssEnd = process.memoryUsage.rss();
      send({
        type: 'final',
        processed,
        lastAt,
        busyMs,
        light: takeLight(),
        traced: takeTraced(),
        rssReady,
        rssEnd,
        cpuMicros: cpu.user + cpu.system,
        calls,
      });
      // The figures are sent; a consumer that cannot close is killed by the host after a grace period.
      await consumer.close().catch((err: unknown) => console.error('worker close failed:', err));
      process.exit(0);
    }
  }
  send({ type: 'ready', rss: rssReady });
}

main(spec).catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
