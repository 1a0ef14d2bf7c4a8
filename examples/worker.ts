/**
 * The worker service of examples/server.ts: it runs the slices the controller's pushes store,
 * and on SIGTERM (or Ctrl-C) finishes its running slices before it exits. Run it against the
 * server's Redis: `REDIS_URL=redis://host:6379 npx tsx examples/worker.ts` (REDIS_URL defaults
 * to redis://localhost:6379, which must be running).
 */
import { SegmentRefresher } from './segment-refresher';

const worker = SegmentRefresher.createWorker({ concurrency: 8 });
worker.on('ready', () => console.log(`worker: serving ${SegmentRefresher.name} (concurrency 8)`));

let stopping = false;
async function shutdown(signal: NodeJS.Signals): Promise<void> {
  // A second Ctrl-C means "now": skip waiting for running slices.
  if (stopping) process.exit(1);
  stopping = true;
  console.log(`worker: ${signal} received, finishing running slices`);
  // Running keys stop after their current slice and are requeued, so another worker picks them up.
  await worker.close();
  await SegmentRefresher.close();
  console.log('worker: stopped');
  process.exit(0);
}

for (const signal of ['SIGTERM', 'SIGINT'] as const) {
  process.on(signal, () => {
    shutdown(signal).catch((err: unknown) => {
      console.error('worker: shutdown failed', err);
      process.exit(1);
    });
  });
}
