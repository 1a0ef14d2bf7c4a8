/**
 * A worker process: builds one system's consumer with the scenario's handler and reports progress
 * over IPC. Consumers always run here, never in the bench process, so the producer, the timers of
 * light-key pushes and the measurement never share an event loop with the handler's CPU cost.
 */
import { now, spin } from '../lib/clock';
import { systemFor } from '../systems';
import type { FromWorker, LightSample, ToWorker, WorkerSpec } from './protocol';

const PROGRESS_MS = 25;

const spec = JSON.parse(process.env.BENCH_WORKER_SPEC ?? 'null') as WorkerSpec | null;
if (!spec) throw new Error('BENCH_WORKER_SPEC is not set: this file is forked by bench/worker/host.ts');

const send = (message: FromWorker) => process.send?.(message);
let processed = 0;
let lastAt = 0;
let light: LightSample[] = [];
const takeLight = () => light.splice(0);

async function main(spec: WorkerSpec): Promise<void> {
  const consumer = await systemFor(spec.system).consumer(spec.target, {
    concurrency: spec.concurrency,
    handler: (key, ids) => {
      spin(ids.length * spec.costPerIdUs);
      processed += ids.length;
      lastAt = now();
      if (key.startsWith(spec.lightPrefix)) for (const id of ids) light.push([id, lastAt]);
    },
  });
  const rssReady = process.memoryUsage.rss();
  let cpuAtStart = process.cpuUsage();
  let progress: NodeJS.Timeout | undefined;

  process.on('message', async (message: ToWorker) => {
    if (message.type === 'start') {
      setTimeout(() => {
        cpuAtStart = process.cpuUsage();
        consumer.start();
        progress = setInterval(() => send({ type: 'progress', processed, lastAt, light: takeLight() }), PROGRESS_MS);
      }, Math.max(0, message.at - now()));
    } else {
      clearInterval(progress);
      const cpu = process.cpuUsage(cpuAtStart);
      const rssEnd = process.memoryUsage.rss();
      send({ type: 'final', processed, lastAt, light: takeLight(), rssReady, rssEnd, cpuMicros: cpu.user + cpu.system });
      // The figures are sent; a consumer that cannot close is killed by the host after a grace period.
      await consumer.close().catch((err: unknown) => console.error('worker close failed:', err));
      process.exit(0);
    }
  });
  send({ type: 'ready', rss: rssReady });
}

main(spec).catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
