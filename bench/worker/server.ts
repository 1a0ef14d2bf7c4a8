/**
 * A web app's controller in a process of its own, for the controller-jump scenario: an Express
 * server whose POST /push pushes a request's ids for its account with one system's producer
 * (performBatchLater, or BullMQ's own add), as a user's controller would. It reports, per phase
 * the bench names over IPC, how long its pushes took and how long its event loop was blocked.
 */
import { monitorEventLoopDelay, performance } from 'node:perf_hooks';
import type { AddressInfo } from 'node:net';
import express from 'express';
import { systemFor } from '../systems';
import type { SystemSpec, Target } from '../systems/types';
import { percentile } from '../lib/stats';

export interface ServerSpec {
  system: SystemSpec;
  target: Target;
}

/** From the bench: close the current window of measurement (`phase`), or stop. */
export type ToServer = { type: 'window'; name: string } | { type: 'stop' };

export type FromServer =
  | { type: 'ready'; port: number }
  /** The window that just closed: push duration p99 and max (ms), the event loop's longest block (ms). */
  | { type: 'window'; name: string; pushes: number; pushP99: number; pushMax: number; loopMaxMs: number; failed: number }
  | { type: 'stopped' };

const spec = JSON.parse(process.env.BENCH_SERVER_SPEC ?? 'null') as ServerSpec | null;
if (!spec) throw new Error('BENCH_SERVER_SPEC is not set: this file is forked by bench/scenarios/controller-jump.ts');
const send = (message: FromServer) => process.send?.(message);

async function main(spec: ServerSpec): Promise<void> {
  const producer = await systemFor(spec.system).producer(spec.target);
  const loop = monitorEventLoopDelay({ resolution: 5 });
  loop.enable();
  let durations: number[] = [];
  let failed = 0;
  const app = express();
  app.use(express.json());
  app.post('/push', (req, res) => {
    const { key, ids } = req.body as { key: string; ids: string[] };
    const started = performance.now();
    producer.push(key, ids).then(
      () => {
        durations.push(performance.now() - started);
        res.status(204).end();
      },
      () => {
        failed++;
        res.status(503).end();
      },
    );
  });
  const server = app.listen(0, '127.0.0.1', () => send({ type: 'ready', port: (server.address() as AddressInfo).port }));
  server.keepAliveTimeout = 60_000;
  process.on('message', (message: ToServer) => {
    if (message.type === 'window') {
      const window = durations.sort((a, b) => a - b);
      durations = [];
      send({
        type: 'window',
        name: message.name,
        pushes: window.length,
        pushP99: percentile(window, 99),
        pushMax: window.at(-1) ?? 0,
        loopMaxMs: loop.max / 1e6,
        failed,
      });
      failed = 0;
      loop.reset();
    } else {
      server.closeAllConnections();
      server.close(() => {
        void producer.close().then(() => {
          send({ type: 'stopped' });
          process.exit(0);
        });
      });
    }
  });
}

void main(spec);
