/**
 * The one interface every compared system implements. A scenario only pushes ids for keys and
 * starts consumers with a handler; how a system turns that into jobs is its adapter's business.
 */
export type SystemId = 'ours' | 'bullmq-per-id' | 'bullmq-chunks' | 'bullmq-per-key' | 'groupmq' | 'raw';

/** Called with the ids of one unit of work of one key (a slice, a chunk, or a single id). */
export type Handler = (key: string, ids: readonly string[]) => void | Promise<void>;

/** Where a system lives: a Redis and a namespace (queue name) of its own. */
export interface Target {
  url: string;
  namespace: string;
}

export interface Producer {
  /** Enqueues `ids` for `key` and resolves when they are durably in Redis. */
  push(key: string, ids: readonly string[]): Promise<void>;
  close(): Promise<void>;
}

export interface Consumer {
  /** Starts taking work. Construction (connections, script loading) happens before, untimed. */
  start(): void;
  close(): Promise<void>;
}

export interface ConsumerOptions {
  concurrency: number;
  handler: Handler;
}

export interface System {
  id: SystemId;
  /** The name shown in tables; variants of one system (e.g. a different maxRuntimeMs) differ here. */
  label: string;
  /** What one `push` of 1,000 ids sends, for the enqueue table. */
  pushes: string;
  producer(target: Target): Promise<Producer>;
  consumer(target: Target, options: ConsumerOptions): Promise<Consumer>;
}

/**
 * A system as a child process can rebuild it: the id plus the variant options. Worker processes get
 * this over the environment, so it must be plain JSON.
 */
export interface SystemSpec {
  id: SystemId;
  /** Options of the variant (ours: `maxRuntimeMs`, `store`, `scheduling`); other systems have none. */
  variant?: OursVariant;
}

export interface OursVariant {
  maxRuntimeMs?: number;
  store?: 'list' | 'set' | 'zset';
  scheduling?: 'fair' | 'fifo';
  /** The `rateLimit` option, for the keys starting with `keyPrefix` (every key without one). */
  rateLimit?: { max: number; durationMs: number; keyPrefix?: string };
  /**
   * Keys starting with `keyPrefix` call `ctx.retryAfter(ms)` instead of running every `every`-th
   * slice (counted per key and worker process), as a handler told "not now" by an upstream does.
   */
  retryAfter?: { keyPrefix: string; every: number; ms: number };
  /** Wait to fill: the `minSliceSize` and `maxWaitMs` options. */
  minSliceSize?: number;
  maxWaitMs?: number;
  /** Group commit: the `pushesPerCall` option (1: each push its own call, as before issue 40). */
  pushesPerCall?: number;
  /** The batcher-wide limits: the `globalRateLimit` and `globalConcurrency` options. */
  globalRateLimit?: { max: number; durationMs: number };
  globalConcurrency?: number;
}
