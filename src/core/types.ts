import type { Job, Processor, Worker, WorkerOptions } from '../bullmq';
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
  /** Only on a ticket's callback job. */
  ticket?: Ticket;
}

export type KeyJob = Job<KeyJobData, void, string>;

/**
 * Why a job run stopped between two slices: its budget was spent, a key that has not had a turn
 * was waiting (`scheduling: 'fair'`), the worker is closing, the lock was lost, or a handler was
 * abandoned (`slice_timeout`; a fresh run goes on), or the handler said the upstream wants a
 * pause (`rate_limited`: `ctx.retryAfter` or a `RateLimitedError`; the key resumes by itself), or
 * the worker's `concurrency` was lowered below its running runs (`concurrency_lowered`: the key
 * is requeued, its claimed slice unrun).
 */
export type StopReason = 'max_runtime' | 'preempted' | 'shutdown' | 'lock_lost' | 'slice_timeout' | 'rate_limited' | 'concurrency_lowered';

export interface IterationContext<Data = unknown> {
  /** The key whose ids these are. */
  key: Key;
  /** The BullMQ job serving the key (one per key). */
  job: KeyJob;
  /**
   * Aborted when the worker shuts down, BullMQ cancels the job, or the key's lock is lost.
   * The slice may still finish; if it throws instead, its ids stay pending and are retried.
   */
  signal: AbortSignal;
  /** 1 for a slice's first run; more when it is a retry of a failed slice (or of a part of one). */
  attempt: number;
  /**
   * The upstream said "not now": throws a `RateLimitedError`, so the slice goes back to the front
   * unchanged (no attempt spent) and the key waits `ms` without holding a worker slot. Same as
   * `throw new RateLimitedError({ retryAfterMs: ms })`. With `{ scope: 'batcher' }` every key of
   * the batcher waits `ms` too (one upstream token shared by every key): no key claims until then.
   */
  retryAfter(ms: number, options?: { scope?: 'key' | 'batcher' }): never;
  /**
   * The data pushed with `id` (`performBatchLater([{ id, data }])`): its latest payload, or
   * undefined for an id pushed without. With `merge: 'all'` see `payloads`.
   */
  data(id: Id): Data | undefined;
  /**
   * Every payload this run of `id` carries, oldest first: one for a list entry, and for a set or
   * zset what `merge` kept (the latest, the first, or every distinct one). [] without data.
   */
  payloads(id: Id): Data[];
  /**
   * Reports that `id`, one of this slice's ids, failed with `error`, while the slice goes on: when
   * the handler returns, the slice's other ids are acknowledged (done, their tickets counted, their
   * data dropped), and only the ids reported go to retry, after their backoff and with their own
   * attempts, then to the dead letters, each with its own error. An `error` that is a
   * `PermanentError` (or BullMQ's `UnrecoverableError`) dead-letters its id at once. A second call
   * for an id replaces its error. A throw still fails the whole slice, as before, and what was
   * reported is dropped. Throws `NotInSliceError` for an id not in the slice. Once the slice has
   * ended (the handler returned, threw, or was abandoned at its timeout or a shutdown), a call does
   * nothing: the slice's fate is settled. With the list store, an id pushed twice into one slice fails both times.
   */
  fail(id: Id | number, error: unknown): void;
}

/** What `performBatchLater` takes: ids, or ids with data (any JSON value, at most `MAX_DATA_BYTES` as JSON). */
export type PushItem<Data = unknown> = Id | number | { id: Id | number; data: Data };

/** `maxPendingPerKey`: an integer >= 1, or a function giving each key its own (undefined: no limit). */
export type MaxPendingPerKey = number | ((key: Key) => number | undefined);

/**
 * At most `max` ids of a key are claimed in any window of `durationMs`, across every worker
 * process (a sliding window in Redis, checked in the claim). A key out of room holds no worker
 * slot: its job waits until the window has room for a slice.
 */

export interface RateLimit {
  /** Ids per window, 1 to 2^31 - 1. */
  max: number;
  /** The window, 1 to 2^31 - 1 ms. */
  durationMs: number;
}

/** A paused key, as `paused()` lists it. */
export interface PausedKey {
  key: Key;
  /** When the pause ends by itself (ms since the epoch, Redis clock); absent: until `resume(key)`. */
  untilMs?: number;
}

export interface PauseOptions {
  /** End the pause by itself at this time (ms since the epoch). @default until resume(key) */
  untilMs?: number;
  /** End the pause by itself this many ms from now (instead of `untilMs`). */
  forMs?: number;
}

/**
 * Whatever it returns that has a `then` is awaited (any promise or thenable, of any realm). `ids`
 * (also `ctx.ids`) is the handler's own copy, as is the data `ctx` returns: splice, sort or change
 * them freely; what the run acks, fails, retries and counts is its own record of the slice.
 */
export type EachIteration<Data = unknown> = (ids: Id[], ctx: IterationContext<Data>) => PromiseLike<unknown> | void;

/** Console-compatible; every method is optional. */
export interface Logger {
  debug?(message: string, meta?: Record<string, unknown>): void;
  info?(message: string, meta?: Record<string, unknown>): void;
  warn?(message: string, meta?: Record<string, unknown>): void;
  error?(message: string, meta?: Record<string, unknown>): void;
}

/** Delay before a failed slice runs again; `attempt` is the attempt that failed (1 for the first). */
export type Backoff =
  | { type: 'fixed'; delayMs: number }
  | { type: 'exponential'; delayMs: number; maxDelayMs?: number }
  | ((attempt: number, error: unknown) => number);

/** What `around` middlewares and events see of a slice. */
export interface SliceInfo {
  key: Key;
  ids: readonly Id[];
  /** 1 for a slice's first run; more for a retry. */
  attempt: number;
  job: KeyJob;
}

/**
 * Wraps every slice (logging, error reporting, tracing). Call `next()` once and await it; what it
 * throws is the slice's failure (rethrow it, or throw your own). The first middleware is outermost.
 * `traceparents`: the W3C traceparents of the pushes whose ids the slice carries, for those made
 * inside a sampled OpenTelemetry span (distinct, at most 128; empty for none), which `sliceTracing()`
 * links the slice's span to. See docs/operations.md for when a retried slice keeps them.
 */
export type SliceMiddleware = (
  slice: SliceInfo & { signal: AbortSignal; traceparents: readonly string[] },
  next: () => Promise<void>,
) => Promise<void>;

/** What became of a failed slice. */
export type FailureOutcome =
  /** Retried whole after `retryInMs`. */
  | 'retry'
  /** It used its attempts (or threw a PermanentError): split in halves, each retried at once. */
  | 'split'
  /** Dead-lettered (a single id, or `isolateFailures: false`), wholly or in part (PermanentError with ids). */
  | 'dead';

/** The events of a batcher, emitted in the worker process; listener errors are logged, not thrown. */
export interface BatcherEvents {
  /**
   * `waitedMs`: how long the slice's oldest id waited from its push to the claim, by the Redis
   * clock (exact for list, from pending's first push for set, from ready time for zset, from the
   * claim for a retry); `waitedMs + durationMs` is push-to-processed latency. For a slice whose
   * handler reported some ids with `ctx.fail`, `ids` are the others, the ids acknowledged.
   */
  'slice:done': [SliceInfo & { durationMs: number; waitedMs?: number }];
  /**
   * A slice whose handler threw (or timed out): `ids` are the slice's. For a slice whose handler
   * returned after `ctx.fail`, `ids` are the ids it reported, `errors` each one's error (`error` is
   * the first's) and `acked` how many of its other ids were acknowledged (which, when more than
   * none, emit `slice:done` too). `dead`: the ids of `ids` that became dead letters (the others go
   * to retry), so `outcome` 'dead' may name only some of them. An error is the Error the handler
   * threw or gave `ctx.fail`, as it was (any other value comes in a `ThrownValueError`, as its
   * `value`), or one of ours: `SliceTimeoutError`, `SliceCrashedError`.
   */
  'slice:failed': [
    SliceInfo & {
      durationMs: number;
      error: Error;
      outcome: FailureOutcome;
      dead: readonly Id[];
      retryInMs?: number;
      errors?: ReadonlyMap<Id, Error>;
      acked?: number;
    },
  ];
  /** A run stopped between slices and requeued its key. */
  interrupted: [{ key: Key; job: KeyJob; reason: StopReason }];
  /** Ids became dead letters; `error` is their last, as in `slice:failed` (one event per distinct error). */
  dead: [{ key: Key; ids: readonly Id[]; error: Error; attempts: number }];
  /** Ids were stored by `performBatchLater` (or a dead-letter requeue) in this process; emitted where they were pushed. */
  pushed: [{ key: Key; count: number }];
}

/** See `BatchByKeyOptions.fastPath`. */
export type FastPath = 'auto' | 'off';

export interface BatchByKeyOptions<Data = unknown> {
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
  /**
   * Wait to fill: a key's run starts once it has at least this many ids ready, or once its oldest
   * ready id has waited `maxWaitMs`, whichever comes first; then it claims up to `sliceSize`, as
   * always. A push that brings a waiting key to this many starts it at once, and a waiting key
   * holds no worker slot. After a run, a key left with fewer waits again, unless its oldest id has
   * waited `maxWaitMs` already. An integer from 1 to `sliceSize`, or a function giving each key
   * its own, called once per push and per run. Requires `maxWaitMs`.
   * @default sliceSize when maxWaitMs is given, else 1 (a key's run starts as soon as an id lands)
   */
  minSliceSize?: number | ((key: Key) => number);
  /**
   * Wait to fill: the longest a key's oldest ready id waits for the key to have `minSliceSize`
   * ids before its run starts anyway (Kafka's `linger.ms`), in whole ms; 0 starts at once. Or a
   * function giving each key its own, called once per push and per run. Every process of a
   * batcher should be given the same values.
   * @default no wait
   */
  maxWaitMs?: number | ((key: Key) => number);
  /**
   * Slices of one key run at once, inside its one job run (1–16). Claims are atomic, so no
   * pending entry is claimed twice; slices finish out of order. The key still holds one worker
   * slot, so this helps handlers that wait on I/O, not CPU-bound ones.
   * @default 1
   */
  concurrencyPerKey?: number;
  /** Budget of one job run; checked between slices, then the job requeues behind other keys. @default 300000 */
  maxRuntimeMs?: number;
  /**
   * `'fair'`: a key that has not had a turn goes ahead of keys that used their budget, and
   * running keys yield to it between slices (see "How it works"). `'fifo'`: every requeued key
   * joins the back of the line and runs until its budget is spent.
   * @default 'fair'
   */
  scheduling?: 'fair' | 'fifo';
  /**
   * A key's share under contention: its runs get `maxRuntimeMs × weight(key)`, so a key of
   * weight 3 gets about three times the slices of a key of weight 1. Called once per run.
   * @default () => 1
   */
  weight?: (key: Key) => number;
  /**
   * A key's rank among keys waiting for a turn (`scheduling: 'fair'` only): a `'high'` key's job
   * waits in a lane of its own (BullMQ's wait list), before every normal key's, light newcomers
   * included, and runs of normal keys yield to it between slices; aging still bounds every normal
   * key's wait. Called at each push that may add the key's job, at each run's end and at each wait.
   * A throw or another value counts as `'normal'` (logged at `warn`).
   * @default () => 'normal'
   */
  priority?: (key: Key) => Priority;
  /**
   * Longest wait for one `eachIteration` call; then its ctx.signal aborts with a SliceTimeoutError,
   * the slice counts as failed and the key moves on (the handler itself is not killed).
   * @default the larger of maxRuntimeMs and 60000
   */
  sliceTimeoutMs?: number;
  /**
   * TTL of the per-key lock, renewed every third of it while the run lives. Bounds how long a
   * crashed worker holds a key: with the defaults its key runs again within BullMQ's stalled
   * check, about 30–45 s (see "Shutdown, crashes and the recovery windows").
   * @default 30000
   */
  lockTtlMs?: number;
  /**
   * How long a closing (or pausing) worker lets a running slice go on once its ctx.signal has
   * fired. A slice still running then is handed back as interrupted: its ids go back in front,
   * no attempt is spent, and the key is released, so `worker.close()` gives every key back within
   * about this long even when a handler ignores ctx.signal. The handler itself is not killed.
   * @default 10000
   */
  shutdownTimeoutMs?: number;
  /** Resolves the key when `performBatchLater` gets none (before `currentKey()` is consulted). */
  key?: () => Key | undefined | Promise<Key | undefined>;
  /** The work for one slice of one key. Required for `batchByKey`; the class form defines it as a method. */
  eachIteration?: EachIteration<Data>;
  /**
   * Set and zset stores: what a push of an id that is already pending does with its data.
   * `'replace'`: the latest wins (debounce); `'keep'`: the first wins; `'all'`: every distinct
   * payload is kept, in push order (Lowkiq's union). The list store keeps each push as its own
   * entry with its own data, so `merge` is an InvalidOptionError there.
   * @default 'replace' (set, zset)
   */
  merge?: MergePolicy;
  /** Runs of a failing slice (the first included) before it is split or dead-lettered. @default 5 */
  attempts?: number;
  /**
   * Delay before a failed slice runs again; the key's other ids go on meanwhile. A function that
   * throws, or returns no finite number, waits 1000 ms.
   * @default { type: 'exponential', delayMs: 1000, maxDelayMs: 60000 }
   */
  backoff?: Backoff;
  /**
   * When a slice has used its attempts, split it in halves and run each once, down to single
   * ids, so only the ids that fail alone become dead letters. `false`: dead-letter the whole slice.
   * @default true
   */
  isolateFailures?: boolean;
  /** Dead letters kept per batcher; past it the oldest are evicted (and counted). @default 10000 */
  maxDeadLetters?: number;
  /** How long a ticket of `performBatchLater(ids, { track: true })` can be read. @default 86400000 (24 h) */
  ticketTtlMs?: number;
  /** Middleware around every slice. @default [] */
  around?: SliceMiddleware | readonly SliceMiddleware[];
  /**
   * BullMQ key prefix; our keys live under `${prefix}:${name}:bbk:` (braces dropped). On a Redis
   * Cluster it must contain a `{hash tag}`, so that each BullMQ queue stays in one slot.
   * @default 'bull', or `bull:{name}` when `connection` is an ioredis `Cluster`
   */
  prefix?: string;
  /**
   * How many BullMQ queues carry the batcher's key jobs (1 to 64). A key's job goes to the queue
   * of its shard (a stable hash of the key); every worker serves every shard with one concurrency
   * budget. On a Redis Cluster each shard's queue gets a hash tag of its own, chosen so that the
   * shards spread evenly over the masters: set it to the number of masters (or a multiple) so that
   * job traffic does not all land on one master. Changing it on a running system loses nothing
   * (see docs/sharding.md). With more than 1, each worker holds two Redis connections per shard.
   * @default 1
   */
  shards?: number;
  /** How often a worker looks for keys with ids but no job (a pusher that died mid-call, a failed job). @default 60000 */
  recoveryIntervalMs?: number;
  /**
   * The longest `performBatchLater` waits for Redis (its script call and the job add); then it
   * rejects with a PushTimeoutError (a PushOutcomeUnknownError), and its ids may still land later
   * (at least once).
   * @default 10000
   */
  pushTimeoutMs?: number;
  /**
   * Group commit: while a push's script call is in flight on a connection (on a Cluster, per
   * slot), pushes that arrive wait and go out together in one call when it returns, at most this
   * many (a full call goes out at once); each keeps its own outcome. An idle connection sends a push at once (see `pushLingerMs`).
   * @default 100
   */
  pushesPerCall?: number;
  /**
   * How long a push to an idle connection waits for others to share its call (Kafka's
   * `linger.ms`): up to this much later, for fewer calls under a steady trickle. 0: none.
   * @default 0
   */
  pushLingerMs?: number;
  /**
   * OpenTelemetry: each `performBatchLater` emits a PRODUCER span `batch-by-key push` (`PUSH_SPAN`),
   * a child of the span active where it is called (or a root), with its key, ids count, store and
   * outcome, and its error when it rejects; its ids carry that span's context, so the slices that
   * run them under `sliceTracing()` link to it. Needs `@opentelemetry/api` (else a
   * MissingDependencyError). Off, a push opens no span and costs nothing more.
   * @default false
   */
  tracePushes?: boolean;
  /**
   * Per-key rate limit: at most `max` ids claimed in any `durationMs` per key, across every
   * worker (see `RateLimit`); or a function giving each key its own (undefined: unlimited),
   * called once per run. Every worker of a batcher should be given the same limits.
   * @default unlimited
   */
  rateLimit?: RateLimit | ((key: Key) => RateLimit | undefined);
  /**
   * Batcher-wide rate limit: at most `max` ids claimed in any `durationMs` across every key and
   * every worker process (one upstream token shared by all accounts, say). It composes with
   * `rateLimit` (the stricter wins); a key that finds the shared window full hands its turn on
   * and waits, holding no worker slot. Recorded in Redis by the first process that has it, and
   * changed at run time with `setGlobalRateLimit` (see docs/failures-and-flow.md, Flow control).
   * @default unlimited
   */
  globalRateLimit?: RateLimit;
  /**
   * Batcher-wide concurrency cap: at most this many slices running at once across every worker
   * process, counted in Redis (a crashed worker's places come back within `lockTtlMs`). Composes
   * with each worker's `concurrency` and `concurrencyPerKey`. Recorded in Redis by the first
   * process that has it, and changed at run time with `setGlobalConcurrency`.
   * @default unlimited
   */
  globalConcurrency?: number;
  /**
   * Backpressure: the most ids a key may have pending (waiting in its store; ids in flight or
   * backing off in retry do not count). A push that would take the key past it is refused whole
   * with a KeyBacklogFullError and writes nothing, so one tenant's flood fails that tenant's
   * pushes, not Redis for everyone. With the set and zset stores only the ids a push adds count
   * (a pending id pushed again adds none). Or a function giving each key its own (undefined: no
   * limit), called once per push, in the pushing process. Give every producer the same. Only pushes
   * are judged: a slice a run hands back unfinished (a graceful close, a worker's pause or
   * cancelJob, a retryAfter) returns to pending whatever the count, so a key may stand past its
   * limit by up to `concurrencyPerKey × sliceSize` until its workers drain it.
   * @default no limit
   */
  maxPendingPerKey?: MaxPendingPerKey;
  /**
   * Runs once per ticket that asked for it (a tracked push of this batcher, or `callback: true`),
   * in a worker, when its last id is done or dead (and, for an open ticket, it is sealed): as a
   * BullMQ job added exactly once, run at least once (retried `attempts` times on a throw), so
   * make it idempotent by the ticket. Deploys and crashes neither lose nor double it. Bounded as a
   * slice is: `signal` aborts with a CallbackTimeoutError after `sliceTimeoutMs` (the attempt
   * fails and is retried) or with a ShutdownError when the worker closes (the job goes back, no
   * attempt spent, and `close()` does not wait for the callback).
   */
  onTicketSettled?: (outcome: TicketOutcome, ticket: Ticket, signal: AbortSignal) => PromiseLike<unknown> | void;
  /**
   * Workers sample the batcher's totals (pending, in flight, retrying, dead, lag, ids processed
   * per second, the top keys) into a capped series in Redis, one sample per interval whatever the
   * number of worker processes, for `history()` and the dashboard's charts. `false`: no sampling
   * (`history()` then returns what is left of earlier samples, if any). Every worker of a batcher
   * should be given the same; producers need none.
   * @default { intervalMs: 10000, retentionMs: 3600000, topKeys: 5 }
   */
  history?: boolean | HistoryOptions;
  /**
   * Whether workers from `createWorker` fuse a key's run into BullMQ's own calls (on a standalone
   * Redis): a fetch that also claims the key's first slice, and a last claim that also completes
   * the job and fetches the next. `'auto'`: when a check at the worker's start finds the installed
   * BullMQ's internals as this version expects them; otherwise the worker runs BullMQ's own fetch
   * and completion, with a warning, and keys run as on a Cluster (a round trip more per run).
   * `'off'`: always the plain path. The environment variable `BATCH_BY_KEY_FAST_PATH` (`auto` or
   * `off`) sets the default, so an operator can turn it off without a code change.
   * @default 'auto'
   */
  fastPath?: FastPath;
  /** Where warnings and errors go. @default silent */
  logger?: Logger;
}

/** See `BatchByKeyOptions.merge`. */
export type MergePolicy = 'replace' | 'keep' | 'all';
/** The sampling behind `history()` (the `history` option). */
export interface HistoryOptions {
  /** How often a sample is taken (by one worker for all of them): 100 to 2^31 - 1 ms. @default 10000 */
  intervalMs?: number;
  /**
   * How far back samples are kept: the series holds `floor(retentionMs / intervalMs)` samples,
   * 1 to 10,000: from `intervalMs` to 10,000 × `intervalMs`.
   * @default 3600000 (1 h); with an intervalMs over 1 h, intervalMs; under 360 ms, 10,000 × intervalMs
   */
  retentionMs?: number;
  /**
   * Keys recorded per sample, for the dashboard's sparklines: this many with the most ids waiting
   * and this many laggiest, merged (0 to 10). Each costs its name and two numbers per sample;
   * 0 keeps the totals alone (about 50 bytes a sample).
   * @default 5
   */
  topKeys?: number;
}

export interface PerformOptions {
  /** The key to push to; defaults to the `key` option's resolver, then `currentKey()`. */
  key?: Key;
  /** `zset` store only: the ids become ready this many ms from now (re-adding moves them). @default 0 */
  delayMs?: number;
  /** Return a `ticket` to follow these ids with `progress(ticket)` and `waitFor(ticket)`. @default false */
  track?: boolean;
  /** Add these ids to an open ticket (`openTicket(key)`), until it is sealed; the push goes to the ticket's key. */
  ticket?: Ticket;
  /**
   * With `track: true`: run `onTicketSettled` (in a worker) once the ticket settles.
   * @default true when this batcher has `onTicketSettled`
   */
  callback?: boolean;
  /**
   * `'high'`: the key's next claims take these ids before any of its ids pushed at `'normal'`
   * (FIFO within each level with the list store; with the zset store, among ready ids). Other
   * keys are not affected: it orders one key's ids, not keys.
   * @default 'normal'
   */
  priority?: Priority;
}

/** A push's level within its key (see `PerformOptions.priority`). */
export type Priority = 'normal' | 'high';

/** What `onTicketSettled` gets: the ticket's final progress. */
export interface TicketOutcome extends Progress {
  ticket: Ticket;
  /** Every id succeeded (`failed` and `dropped` are 0); otherwise it is only complete: every id is done, dead or dropped. */
  success: boolean;
}

/** Names a tracked push (opaque; it encodes the key). */
export type Ticket = string;

export interface PerformResult {
  key: Key;
  /** Ids sent to Redis (after stringifying; the set and zset stores may hold fewer). */
  pushed: number;
  /** With `track: true` (a new ticket) or `ticket` (that open ticket). */
  ticket?: Ticket;
}

/** A push that names its ticket: `track: true` (a new one) or `ticket` (an open one). */
export type TrackedPerformOptions = PerformOptions & ({ track: true } | { ticket: Ticket });

/** What a push with `track: true` or `ticket` resolves with: its `ticket` is always there. */
export interface TrackedPerformResult extends PerformResult {
  ticket: Ticket;
}

/**
 * The ids of one tracked push. Every id passed counts in `total`, duplicates included; an id
 * that a set or zset deduplicated is done (or failed) when the one run of it is.
 */
export interface Progress {
  total: number;
  done: number;
  /** Dead-lettered. */
  failed: number;
  /** Removed by an operator's `drop` of the key before they ran (0 for a ticket no drop touched). */
  dropped: number;
  /** total - done - failed - dropped: waiting, in flight or backing off. */
  pending: number;
  /** The first errors of dead ids (at most 100). */
  errors: { id: Id; message: string }[];
  /** False for an open ticket that may still get pushes (`openTicket`) until `sealTicket`. */
  sealed: boolean;
}

export interface WaitForOptions {
  /** Reject with a WaitTimeoutError after this long. @default 60000 */
  timeoutMs?: number;
  /**
   * How often to read the progress when no change is announced. Workers announce each change of a
   * ticket on a Redis channel, and `waitFor` reads it then; this timer covers an announcement lost
   * (pub/sub delivers at most once) or a connection the ACL denies the channel. @default 1000
   */
  pollMs?: number;
  /**
   * Called with each reading whose counts differ from the one before, the first and the last
   * included: progress as it happens. A listener that throws rejects the wait.
   */
  onProgress?: (progress: Progress) => void;
}

export interface Backlog {
  /** Ids waiting to be claimed. */
  pending: number;
  /** Ids claimed by a running slice (or by a crashed one, until recovered). */
  inFlight: number;
  /** Ids of failed slices backing off before their next attempt. */
  retrying: number;
}

/** Options of `pending(key, options)`. */
export interface PendingOptions {
  /** Which level to list: `'high'` (pushes with `priority: 'high'`), `'normal'`, or both, high first. @default both */
  level?: 'high' | 'normal';
  /** List and zset stores: the position of the page's first id (pass the last page's `next`). @default 0 */
  offset?: number;
  /** Set store: where the last page stopped (its `next.cursor`); none starts at the beginning. */
  cursor?: string;
  /** Ids at most in the page, 1 to 1,000. @default 100 */
  limit?: number;
}

/** One pending id of `pending()`. */
export interface PendingId {
  id: Id;
  level: 'high' | 'normal';
  /** The data its claim would hand the handler, as `ctx.payloads(id)` gives it: [] without data. */
  payloads: unknown[];
  /** Zset store: when it is ready (ms, Redis clock); a time still to come for an id not ready yet. */
  readyAt?: number;
}

/** A page of a key's pending ids, in the order its claims take them. */
export interface PendingPage {
  ids: PendingId[];
  /** Ids pending at each level (whatever `level` lists). */
  high: number;
  normal: number;
  /** Where the next page starts: spread it into the next call's options; absent on the last page. */
  next?: { offset: number } | { cursor: string };
}

/** A slice a run of the key holds now (`inFlight()`). */
export interface RunningSlice {
  /** The run's lane (0 unless `concurrencyPerKey` > 1). */
  lane: number;
  ids: Id[];
  /** 1 for a first run; more for a failed slice run again. */
  attempt: number;
  /** Whether it was claimed from the high level. */
  high: boolean;
}

/** A failed slice backing off before its next run (`inFlight()`). */
export interface RetryingSlice {
  sliceId: string;
  ids: Id[];
  /** Failed runs so far. */
  attempts: number;
  /** When it may run again (ms, Redis clock). */
  dueAt: number;
  /** When its first run failed (ms). */
  firstFailedAt: number;
}

/** What runs of a key hold now and what waits to run again (`inFlight()`). */
export interface KeyInFlight {
  running: RunningSlice[];
  retrying: RetryingSlice[];
}

/** Options of `drop`. */
export interface DropOptions {
  /** Also remove the key's dead letters. @default false */
  deadLetters?: boolean;
}

/** What `drop` removed from a key, by kind (ids count once per entry, as `backlog` counts them). */
export interface Dropped {
  /** Ids that were waiting, at both levels (normal and `priority: 'high'`). */
  pending: number;
  /** Ids of slices a running run held, in every lane: abandoned (their handler may still run; they are not run again). */
  inFlight: number;
  /** Ids of failed slices that were backing off. */
  retrying: number;
  /** Tickets that counted some of those ids as `dropped`. */
  tickets: number;
  /** Dead letters of the key removed (only with `deadLetters: true`). */
  deadLetters: number;
}

/** One key in `stats()`. */
export interface KeyStats extends Backlog {
  key: Key;
  /** Age of the key's oldest pending id by the Redis clock; 0 with nothing pending (see the README for what is exact per store). */
  oldestPendingAgeMs: number;
}

/** Options of `recover`. */
export interface RecoverOptions {
  /** Look at every key in Redis (a `SCAN` of the batcher's key names), not only those its recovery index lists. @default false */
  full?: boolean;
}

export interface StatsOptions {
  /** Keys read at most (from the recovery indexes, then the key jobs that have not ended, in pages); past it `truncated` is true. @default 10000 */
  maxKeys?: number;
  /** Length of `topKeys` and `laggingKeys`. @default 10 */
  top?: number;
}

/** A batcher's totals, summed over the keys read (all of them unless `truncated`). */
export interface Stats {
  name: string;
  /** When the stats were read, by the Redis clock (ms since the epoch). */
  at: number;
  /** Keys holding ids (pending, in flight or backing off). */
  keys: number;
  pending: number;
  inFlight: number;
  retrying: number;
  /** Dead letters (exact, whatever `truncated` says). */
  dead: number;
  /** The largest `oldestPendingAgeMs` of any key: the batcher's lag. */
  oldestPendingAgeMs: number;
  /** The keys with the most ids waiting (pending + backing off), most first. */
  topKeys: KeyStats[];
  /** The keys whose oldest pending id is oldest, laggiest first (only keys with pending ids). */
  laggingKeys: KeyStats[];
  /** Keys read: index entries (drained keys included until a recovery sweep drops them), then keys of the key jobs that have not ended. */
  scannedKeys: number;
  /** More than `maxKeys` keys are indexed: the totals cover the first `maxKeys` (oldest last push first). */
  truncated: boolean;
  /** Keys paused now (`pause`), whatever `maxKeys` says. */
  paused: PausedKey[];
  /** The batcher-wide limits (`globalRateLimit`, `globalConcurrency`) and their use now. */
  limits: GlobalLimitsStats;
}

/** `stats().limits`: the batcher-wide limits in force, and their use. */
export interface GlobalLimitsStats {
  /** `globalRateLimit`, with the ids its window holds now; absent: none. */
  rate?: RateLimit & { used: number };
  /** `globalConcurrency`, with the slices (lanes) holding a place now; absent: none. */
  concurrency?: { limit: number; running: number };
  /** Key jobs waiting for a place under `globalConcurrency`. */
  waiting: number;
  /** Ms left of a hold every key waits out (`ctx.retryAfter(ms, { scope: 'batcher' })`); 0: none. */
  heldMs: number;
  /** The time keys spent waiting for a batcher-wide limit, ms summed over every wait since the batcher began, and how many waits. */
  waitedMs: number;
  waits: number;
}

/** A key in a history sample. */
export interface HistoryKey {
  key: Key;
  /** pending + retrying: the ids the key has waiting. */
  backlog: number;
  oldestPendingAgeMs: number;
}

/** The batcher's totals at one moment (`stats()` read by the worker that took the sample; `at`: when). */
export interface HistorySample extends Pick<Stats, 'at' | 'keys' | 'pending' | 'inFlight' | 'retrying' | 'dead' | 'oldestPendingAgeMs'> {
  /**
   * Ids of successful slices per second, by every worker, since the previous sample; absent for
   * the first sample and after the shared counter was reset (it expires after `retentionMs` idle).
   */
  idsPerSec?: number;
  /** The `history.topKeys` keys with the most ids waiting and as many laggiest, merged (most waiting first). */
  topKeys: HistoryKey[];
  /** The stats read covered only `maxKeys` (10,000) keys: the totals are partial. */
  truncated: boolean;
}

/** A batcher's sampled history (`history()`), oldest sample first. */
export interface History {
  name: string;
  /** When it was read, by the Redis clock (ms since the epoch). */
  at: number;
  samples: HistorySample[];
}

/** A dead letter: an id whose slice used every attempt (or threw a PermanentError for it). */
export interface DeadLetter<Data = unknown> {
  key: Key;
  id: Id;
  /** The data the id carried (its latest payload), if it was pushed with data; `requeue` pushes it back. */
  data?: Data;
  /** Every payload it carried, oldest first (see `IterationContext.payloads`). */
  payloads?: Data[];
  /** The last error: `name` cut to 200 UTF-16 code units, `message` and `stack` to 2,000, well-formed (lone surrogates become U+FFFD). */
  error: { name: string; message: string; stack?: string };
  /** Failed runs that included the id (since it was last pushed). */
  attempts: number;
  /** The first failure of the id's slice, in ms since the epoch by the worker's clock. */
  firstFailedAt: number;
  lastFailedAt: number;
}

export interface DeadLetterQuery {
  /** Only this key's letters. */
  key?: Key;
  /** Only these ids (of `key`, or of every key). */
  ids?: ReadonlyArray<Id | number>;
}

export interface DeadLetterListOptions {
  key?: Key;
  /** @default 100 (at most 1000) */
  limit?: number;
  /** From the previous page's `cursor`. */
  cursor?: string;
  /** `time`: most recent failure first; `attempts`: most attempts first. @default 'time' */
  order?: 'time' | 'attempts';
}

export interface DeadLetters<Data = unknown> {
  /** A page of letters, and the cursor of the next page (absent on the last). */
  list(options?: DeadLetterListOptions): Promise<{ letters: DeadLetter<Data>[]; cursor?: string }>;
  count(options?: { key?: Key }): Promise<number>;
  /**
   * Pushes the ids back (by the store's rules: a set merges them, a list appends them) and removes their letters; returns how many.
   * A key whose push is refused for its backlog (`maxPendingPerKey`) keeps its letters (logged at warn); the other keys go on.
   */
  requeue(query?: DeadLetterQuery): Promise<number>;
  /** Removes letters; returns how many. */
  purge(query?: DeadLetterQuery): Promise<number>;
  /** Letters the `maxDeadLetters` cap has evicted, ever. */
  evicted(): Promise<number>;
}

/**
 * The worker `createWorker` returns: a BullMQ Worker of the batcher's queue (of shard 0 with
 * `shards` > 1). With shards, it leads the workers of the other shards: they run, pause, resume
 * and close with it, share its `concurrency` (one budget of slots for all shards: a slot that
 * frees goes to the shard that waited longest), and their job events (`active`, `completed`,
 * `failed`, `progress`, `stalled`, `error`) are emitted on it too. Job ids are per shard:
 * `cancelJob(id)` reaches the runs of this worker's own shard (`shardWorkers` has the others).
 */
export interface KeyWorker extends Worker<KeyJobData, void, string> {
  /** One worker per shard served, this one first: the batcher's shards, and those of other counts still recorded. */
  readonly shardWorkers: readonly Worker<KeyJobData, void, string>[];
}

/** A shard count a process of the batcher pushed or ran with (see `Batcher.shardCounts`). */
export interface ShardCount {
  /** The `shards` value. */
  count: number;
  /** Whether it is this batcher's own `shards`. */
  own: boolean;
  /** Key jobs its queues hold: waiting (paused ones too), prioritized, delayed or active. */
  jobs: number;
  /** Keys its recovery indexes list: pushed to recently, and not yet dropped by the recovery sweep once drained. */
  keys: number;
}

/** Options for `createWorker`: BullMQ's, minus what the batcher sets itself. */
export type CreateWorkerOptions = Partial<Omit<WorkerOptions, 'connection' | 'prefix'>> & {
  connection?: Connection;
};

/** The processor returned by `processor()`, for a `Worker` you construct yourself. */
export type KeyProcessor = Processor<KeyJobData, void, string>;

/** Handles the jobs of the queue that are not ours, when you share it with other job names. */
export type FallbackProcessor = (job: Job<unknown, unknown, string>, token?: string, signal?: AbortSignal) => Promise<unknown>;

export interface Batcher<Data = unknown> {
  /** The queue name given in the options. */
  readonly name: string;
  /** Push ids for a key and make sure one job serves it; with `track: true` or `ticket`, the result has its `ticket`. */
  performBatchLater(ids: ReadonlyArray<PushItem<Data>>, options: TrackedPerformOptions): Promise<TrackedPerformResult>;
  performBatchLater(ids: ReadonlyArray<PushItem<Data>>, options?: PerformOptions): Promise<PerformResult>;
  /**
   * A BullMQ Worker that serves this batcher's keys: with `shards` > 1, the worker of shard 0,
   * which leads one worker per other shard (see KeyWorker) under one concurrency budget.
   */
  createWorker(options?: CreateWorkerOptions): KeyWorker;
  /**
   * A BullMQ processor for `new Worker(name, processor, opts)`. Jobs that are not ours go to `fallback`.
   * Call `attach(worker)` afterwards for graceful shutdown, logging and recovery.
   */
  processor(fallback?: FallbackProcessor): KeyProcessor;
  /** Wires a Worker you built with `processor()`: shutdown signal, error logging, stranded-key recovery. */
  attach(worker: Worker): void;
  /** How many ids a key has waiting, in flight and backing off. */
  backlog(key: Key): Promise<Backlog>;
  /** A page of a key's pending ids in the order they will run, with their data (see docs/api.md). */
  pending(key: Key, options?: PendingOptions): Promise<PendingPage>;
  /** The slices runs of a key hold now, per lane, and its failed slices waiting to run again. */
  inFlight(key: Key): Promise<KeyInFlight>;
  /**
   * Removes a key's whole backlog in one step (pending at both levels, in flight, backing off, its
   * data, tickets' ids counted as dropped, its waiting job) and fences off a run holding it: its
   * slice in flight is abandoned, nothing of it comes back. A pause is kept. Returns what went, by kind.
   */
  drop(key: Key, options?: DropOptions): Promise<Dropped>;
  /** Totals, lag and the busiest keys, read from the index of keys with recent pushes (bounded by `maxKeys`). */
  stats(options?: StatsOptions): Promise<Stats>;
  /**
   * The samples workers took of `stats()` over the last `history.retentionMs` (default: one per
   * 10 s, an hour kept), oldest first: one read (LRANGE) of a capped list.
   */
  history(): Promise<History>;
  /** The batcher's dead letters. */
  readonly deadLetters: DeadLetters<Data>;
  /** Counts of a tracked push; an UnknownTicketError once it expired. */
  progress(ticket: Ticket): Promise<Progress>;
  /**
   * Resolves with the progress once nothing of the push is pending (and an open ticket is sealed);
   * a WaitTimeoutError after `timeoutMs`, Redis away or not; a ClosedError when `close()` ends it.
   */
  waitFor(ticket: Ticket, options?: WaitForOptions): Promise<Progress>;
  /**
   * An open ticket of `key`: push to it with `performBatchLater(ids, { ticket })` any number of
   * times, from any process, then `sealTicket(ticket)`; it settles (and calls back) only once sealed.
   */
  openTicket(key: Key, options?: { callback?: boolean }): Promise<Ticket>;
  /** No more pushes to this ticket; an UnknownTicketError or TicketSealedError otherwise. */
  sealTicket(ticket: Ticket): Promise<void>;
  on<E extends keyof BatcherEvents>(event: E, listener: (...args: BatcherEvents[E]) => void): this;
  off<E extends keyof BatcherEvents>(event: E, listener: (...args: BatcherEvents[E]) => void): this;
  /**
   * Pauses a key: pushes keep storing its ids, nothing of it runs (a run in progress stops after
   * its slice and frees its worker slot), across worker restarts, until `resume(key)` or the
   * pause's end. Pausing a paused key replaces its end.
   */
  pause(key: Key, options?: PauseOptions): Promise<void>;
  /** Ends a key's pause and starts its job at once if it has ids; a NotPausedError if it is not paused. */
  resume(key: Key): Promise<void>;
  /** The keys paused now (timed pauses that ended are left out). */
  paused(): Promise<PausedKey[]>;
  /** Pauses the whole batcher: BullMQ's queue pause (workers start no job; runs in progress go on). */
  pauseAll(): Promise<void>;
  /** Undoes `pauseAll`. */
  resumeAll(): Promise<void>;
  /**
   * Sets the batcher-wide rate limit (`globalRateLimit`) for every process, at run time; null
   * turns it off. Recorded in Redis: workers follow within about a second while a limit is in
   * force, within `recoveryIntervalMs` where none was (at once in this process).
   */
  setGlobalRateLimit(limit: RateLimit | null): Promise<void>;
  /** Sets the batcher-wide concurrency cap (`globalConcurrency`) for every process, at run time; null turns it off. As `setGlobalRateLimit`. */
  setGlobalConcurrency(n: number | null): Promise<void>;
  /**
   * The shard counts (`shards`) the batcher's processes have pushed or run with, and the key jobs
   * each count's queues hold: workers serve every count listed (see docs/sharding.md).
   */
  shardCounts(): Promise<ShardCount[]>;
  /**
   * Forgets a shard count, once no process uses it, its queues hold no job and its recovery
   * indexes no key: workers stop serving it at their next sweep. A ShardsInUseError otherwise,
   * and for this batcher's own count. A process still running with the count records it again
   * within its `recoveryIntervalMs` (and workers serve it again).
   */
  retireShardCount(count: number): Promise<void>;
  /**
   * Adds a job for every key that has ids but no job and no running lock (workers also do this
   * every `recoveryIntervalMs`), among the keys the recovery index lists. With `full: true` it
   * first lists every key that has anything in Redis (a `SCAN`): for keys whose job was removed
   * by hand, which nothing lists. Returns how many keys got one.
   */
  recover(options?: RecoverOptions): Promise<number>;
  /**
   * Closes the workers created here, the queue and our Redis connections, once the calls under way
   * have finished (at most `pushTimeoutMs`); a `waitFor` under way rejects with a ClosedError.
   */
  close(): Promise<void>;
}
