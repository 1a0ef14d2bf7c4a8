import type { Job, Processor, Worker, WorkerOptions } from 'bullmq';
import type { Cluster, Redis, RedisOptions } from 'ioredis';

/** An ioredis client (standalone or Cluster), ioredis options, or a `redis://` / `rediss://` URL. */
export type Connection = Redis | Cluster | RedisOptions | string;

/** The partition of work, usually an account id. Any non-empty string up to `MAX_KEY_LENGTH`. */
export type Key = string;

/** One unit of work inside a key. Numbers are accepted on push and stored as strings. */
export type Id = string;

/** How the ids of one key are kept. */
export type StoreKind = 'list' | 'set' | 'zset';

/** The data of the single BullMQ job that serves a key. */
export interface KeyJobData {
  key: Key;
}

export type KeyJob = Job<KeyJobData, void, string>;

/** Why a job run stopped between two slices. */
export type StopReason = 'max_runtime' | 'shutdown' | 'lock_lost';

export interface IterationContext {
  /** The key whose ids these are. */
  key: Key;
  /** The BullMQ job serving the key (one per key). */
  job: KeyJob;
  /**
   * Aborted when the worker shuts down, BullMQ cancels the job, or the key's lock is lost.
   * The slice may still finish; if it throws instead, its ids stay pending and are retried.
   */
  signal: AbortSignal;
}

export type EachIteration = (ids: Id[], ctx: IterationContext) => Promise<void> | void;

/** Console-compatible; every method is optional. */
export interface Logger {
  debug?(message: string, meta?: Record<string, unknown>): void;
  info?(message: string, meta?: Record<string, unknown>): void;
  warn?(message: string, meta?: Record<string, unknown>): void;
  error?(message: string, meta?: Record<string, unknown>): void;
}

/** Delay before retrying a key whose slice threw. */
export type Backoff =
  | { type: 'fixed'; delayMs: number }
  | { type: 'exponential'; delayMs: number; maxDelayMs?: number }
  | ((failures: number, error: unknown) => number);

export interface BatchByKeyOptions {
  /** The BullMQ queue name and our Redis namespace. Letters, digits, `.`, `_`, `-`; at most 100. */
  name: string;
  /**
   * An ioredis client (`Redis` or `Cluster`; yours to close), ioredis options, or a Redis URL.
   * With options or a URL, the batcher opens its own connections and closes them in `close()`.
   */
  connection: Connection;
  /**
   * `'list'`: FIFO, duplicates kept. `'set'`: duplicates collapse, no order.
   * `'zset'`: each id is ready at a time (`delayMs`); re-adding an id moves it (debounce).
   * @default 'list'
   */
  store?: StoreKind;
  /** Ids handed to one `eachIteration` call. @default 100 */
  sliceSize?: number;
  /** Budget of one job run; checked between slices, then the job requeues behind other keys. @default 300000 */
  maxRuntimeMs?: number;
  /**
   * Longest wait for one `eachIteration` call; then its ctx.signal aborts with a SliceTimeoutError,
   * the slice counts as failed and the key moves on (the handler itself is not killed).
   * @default the larger of maxRuntimeMs and 60000
   */
  sliceTimeoutMs?: number;
  /** TTL of the per-key lock, renewed while the job runs. Bounds how long a crashed worker holds a key. @default 300000 */
  lockTtlMs?: number;
  /** Resolves the key when `performBatchLater` gets none (before `currentKey()` is consulted). */
  key?: () => Key | undefined | Promise<Key | undefined>;
  /** The work for one slice of one key. Required for `batchByKey`; the class form defines it as a method. */
  eachIteration?: EachIteration;
  /** Failures in a row before the key's job fails in BullMQ (its ids stay pending). @default 5 */
  attempts?: number;
  /** Delay before a failed key runs again. @default { type: 'exponential', delayMs: 1000, maxDelayMs: 60000 } */
  backoff?: Backoff;
  /**
   * BullMQ key prefix; our keys live under `${prefix}:${name}:bbk:` (braces dropped). On a Redis
   * Cluster it must contain a `{hash tag}`, so that each BullMQ queue stays in one slot.
   * @default 'bull', or `bull:{name}` when `connection` is an ioredis `Cluster`
   */
  prefix?: string;
  /** How often a worker looks for keys with ids but no job (a pusher that died mid-call, a failed job). @default 60000 */
  recoveryIntervalMs?: number;
  /** Where warnings and errors go. @default silent */
  logger?: Logger;
}

export interface PerformOptions {
  /** The key to push to; defaults to the `key` option's resolver, then `currentKey()`. */
  key?: Key;
  /** `zset` store only: the ids become ready this many ms from now (re-adding moves them). @default 0 */
  delayMs?: number;
}

export interface PerformResult {
  key: Key;
  /** Ids sent to Redis (after stringifying; the set and zset stores may hold fewer). */
  pushed: number;
}

export interface Backlog {
  /** Ids waiting to be claimed. */
  pending: number;
  /** Ids claimed by a running slice (or by a crashed one, until recovered). */
  inFlight: number;
}

/** Options for `createWorker`: BullMQ's, minus what the batcher sets itself. */
export type CreateWorkerOptions = Partial<Omit<WorkerOptions, 'connection' | 'prefix'>> & {
  connection?: Connection;
};

/** The processor returned by `processor()`, for a `Worker` you construct yourself. */
export type KeyProcessor = Processor<KeyJobData, void, string>;

/** Handles the jobs of the queue that are not ours, when you share it with other job names. */
export type FallbackProcessor = (job: Job<unknown, unknown, string>, token?: string, signal?: AbortSignal) => Promise<unknown>;

export interface Batcher {
  /** The queue name given in the options. */
  readonly name: string;
  /** Push ids for a key and make sure one job serves it. */
  performBatchLater(ids: ReadonlyArray<Id | number>, options?: PerformOptions): Promise<PerformResult>;
  /** A BullMQ Worker that serves this batcher's keys. */
  createWorker(options?: CreateWorkerOptions): Worker<KeyJobData, void, string>;
  /**
   * A BullMQ processor for `new Worker(name, processor, opts)`. Jobs that are not ours go to `fallback`.
   * Call `attach(worker)` afterwards for graceful shutdown, logging and recovery.
   */
  processor(fallback?: FallbackProcessor): KeyProcessor;
  /** Wires a Worker you built with `processor()`: shutdown signal, error logging, stranded-key recovery. */
  attach(worker: Worker): void;
  /** How many ids a key has waiting and in flight. */
  backlog(key: Key): Promise<Backlog>;
  /**
   * Adds a job for every key that has ids but no job and no running lock (workers also do this
   * every `recoveryIntervalMs`). Returns how many keys got one.
   */
  recover(): Promise<number>;
  /** Closes the workers created here, the queue and our Redis connections. */
  close(): Promise<void>;
}
