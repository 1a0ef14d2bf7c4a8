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
  /** Keys with this prefix have every handler call reported (see TracedSlice); none when unset. */
  tracePrefix?: string;
  /**
   * Ms each handler call awaits a timer after its CPU cost: a call to another service, which
   * holds the worker slot without using the CPU. 0 or unset: the handler is synchronous.
   */
  sliceWaitMs?: number;
}

/** [id, processed at (epoch ms, see lib/clock now())] */
export type LightSample = [string, number];

/** One handler call of a traced key: [key, ids, started at, ended at] (epoch ms, see lib/clock now()). */
export type TracedSlice = [string, number, number, number];

export type ToWorker = { type: 'start'; at: number } | { type: 'stop' };

export type FromWorker =
  | { type: 'ready'; rss: number }
  /** `busyMs`: time spent inside handler calls so far, every slot of the process summed. */
  | { type: 'progress'; processed: number; lastAt: number; busyMs: number; light: LightSample[]; traced: TracedSlice[] }
  | {
      type: 'final';
      processed: number;
      lastAt: number;
      busyMs: number;
      light: LightSample[];
      traced: TracedSlice[];
      rssReady: number;
      rssEnd: number;
      cpuMicros: number;
      /** Handler calls (slices, chunks or single ids) made. */
      calls: number;
    };
