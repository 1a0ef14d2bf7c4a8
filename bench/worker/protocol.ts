import type { SystemSpec, Target } from '../systems/types';

/** What a worker process runs; passed as JSON in BENCH_WORKER_SPEC. */
export interface WorkerSpec {
  system: SystemSpec;
  target: Target;
  concurrency: number;
  /** CPU burnt per id by the handler, identical for every system in a scenario. */
  costPerIdUs: number;
  /** Keys with this prefix are light keys: their ids are reported with the time they were processed. */
  lightPrefix: string;
}

/** [id, processed at (epoch ms, see lib/clock now())] */
export type LightSample = [string, number];

export type ToWorker = { type: 'start'; at: number } | { type: 'stop' };

export type FromWorker =
  | { type: 'ready'; rss: number }
  | { type: 'progress'; processed: number; lastAt: number; light: LightSample[] }
  | { type: 'final'; processed: number; lastAt: number; light: LightSample[]; rssReady: number; rssEnd: number; cpuMicros: number };
