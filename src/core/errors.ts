import { MAX_TIMER_MS } from './limits';
import { safeString } from './text';
import type { Id, Key, Progress } from './types';

/**
 * Every error this library throws on purpose is a `BatchByKeyError` with a stable `code`,
 * so callers can branch on `err.code` (or `instanceof` a subclass) instead of parsing messages.
 */
export type ErrorCode =
  | 'ERR_INVALID_OPTION'
  | 'ERR_INVALID_IDS'
  | 'ERR_INVALID_KEY'
  | 'ERR_MISSING_KEY'
  | 'ERR_LOCK_LOST'
  | 'ERR_SHUTDOWN'
  | 'ERR_CLOSED'
  | 'ERR_SLICE_TIMEOUT'
  | 'ERR_CALLBACK_TIMEOUT'
  | 'ERR_CALLBACK_FAILED'
  | 'ERR_SLICE_CRASHED'
  | 'ERR_THROWN_VALUE'
  | 'ERR_PERMANENT'
  | 'ERR_UNKNOWN_TICKET'
  | 'ERR_WAIT_TIMEOUT'
  | 'ERR_PUSH_TIMEOUT'
  | 'ERR_PUSH_OUTCOME_UNKNOWN'
  | 'ERR_MISSING_DEPENDENCY'
  | 'ERR_RATE_LIMITED'
  | 'ERR_NOT_PAUSED'
  | 'ERR_MISSING_HANDLER'
  | 'ERR_STORE_MISMATCH'
  | 'ERR_TICKET_SEALED'
  | 'ERR_SHARDS_IN_USE'
  | 'ERR_KEY_BACKLOG_FULL'
  | 'ERR_NOT_IN_SLICE'
  | 'ERR_WRONG_TYPE';

export class BatchByKeyError extends Error {
  readonly code: ErrorCode;
  constructor(code: ErrorCode, message: string) {
    super(message);
    this.name = new.target.name;
    this.code = code;
  }
}

/**
 * `performBatchLater` cannot tell whether its ids were stored: its script call was sent, and what
 * ended it was no refusal from Redis (the connection closed, perhaps after Redis ran the call;
 * ioredis gave up retrying on a Cluster during a failover, whose first attempt may have run; the
 * key's job could not be added after the ids were stored). Its ids may have been stored, and then
 * they run. `cause` is the error that ended it. A retry of the push is at least once: the set and
 * zset stores keep one copy of a pending id, the list store stores it twice. Any other error of a
 * push stored none of its ids. `PushTimeoutError` is one.
 */
export class PushOutcomeUnknownError extends BatchByKeyError {
  constructor(message: string, options: { cause?: unknown } = {}) {
    super('ERR_PUSH_OUTCOME_UNKNOWN', message);
    if (options.cause !== undefined) this.cause = options.cause;
  }
}

/**
 * `performBatchLater` could not finish with Redis within `pushTimeoutMs` (Redis unreachable, a
 * failing TLS handshake, a stalled connection). A `PushOutcomeUnknownError`: its ids may still
 * land once Redis answers (the commands stay queued on the connection), so delivery is at least
 * once, and a retry may store them twice (the set and zset stores collapse such duplicates).
 */
export class PushTimeoutError extends PushOutcomeUnknownError {
  override readonly code = 'ERR_PUSH_TIMEOUT';
}

/**
 * An option passed to `batchByKey`, `BatchByKey` or `createWorker` is missing or out of range; or
 * (`batch-by-key/nestjs`) a `BatchByKeyModule` registration or decorator does not fit the application.
 */
export class InvalidOptionError extends BatchByKeyError {
  constructor(message: string) {
    super('ERR_INVALID_OPTION', message);
  }
}

/** `performBatchLater` got something other than an array of non-empty strings or finite numbers. */
export class InvalidIdsError extends BatchByKeyError {
  constructor(message: string) {
    super('ERR_INVALID_IDS', message);
  }
}

/** A key is not a non-empty, well-formed string within the size limit. */
export class InvalidKeyError extends BatchByKeyError {
  constructor(message: string) {
    super('ERR_INVALID_KEY', message);
  }
}

/** No key was given, the `key` resolver returned nothing, and no `withKey` context is active. */
export class MissingKeyError extends BatchByKeyError {
  constructor(message: string) {
    super('ERR_MISSING_KEY', message);
  }
}

/**
 * The per-key lock expired or was taken over while a slice was running.
 * It is the reason of `ctx.signal` in that case; the slice's ids stay pending.
 */
export class LockLostError extends BatchByKeyError {
  constructor(message: string) {
    super('ERR_LOCK_LOST', message);
  }
}

/** The worker is closing (or BullMQ cancelled the job); the reason of `ctx.signal` in that case. */
export class ShutdownError extends BatchByKeyError {
  constructor(message: string) {
    super('ERR_SHUTDOWN', message);
  }
}

/** A slice ran longer than `sliceTimeoutMs`: the reason of its `ctx.signal`, and the slice counts as failed. */
export class SliceTimeoutError extends BatchByKeyError {
  constructor(message: string) {
    super('ERR_SLICE_TIMEOUT', message);
  }
}

/**
 * An `onTicketSettled` call ran longer than `sliceTimeoutMs`: the reason of its signal, and the
 * callback's job fails that attempt (BullMQ retries it, `attempts` times in all).
 */
export class CallbackTimeoutError extends BatchByKeyError {
  constructor(message: string) {
    super('ERR_CALLBACK_TIMEOUT', message);
  }
}

/**
 * An `onTicketSettled` call threw (or rejected with) something that is not an Error (`undefined`,
 * a string): the callback's job fails that attempt with this error, what was thrown as its
 * `cause`, and BullMQ retries it as for any other throw. BullMQ reads a failure's `name`, and a
 * job that failed with `undefined` was never retried.
 */
export class CallbackFailedError extends BatchByKeyError {
  constructor(message: string, cause: unknown) {
    super('ERR_CALLBACK_FAILED', message);
    this.cause = cause;
  }
}

/**
 * Recorded (in dead letters and `slice:failed`) for a slice whose runs died with their worker
 * (a crash, an OOM kill, a lost lock) until it had used its attempts: it is split or
 * dead-lettered without running again.
 */
export class SliceCrashedError extends BatchByKeyError {
  constructor(message: string) {
    super('ERR_SLICE_CRASHED', message);
  }
}

/**
 * What the `slice:failed` and `dead` events carry for a handler that threw, or gave `ctx.fail`, a
 * value that is not an Error (a string, a plain object): that value is `value`, its text the message.
 * An Error is carried as it was thrown, so `instanceof` your own classes holds.
 */
export class ThrownValueError extends BatchByKeyError {
  constructor(readonly value: unknown) {
    super('ERR_THROWN_VALUE', safeString(value));
  }
}

/**
 * An event's error: the Error as thrown (one of another realm too, a vm context's, which fails
 * `instanceof Error` but is one), or anything else in a ThrownValueError. @internal
 */
export function asError(value: unknown): Error {
  return value instanceof Error || Object.prototype.toString.call(value) === '[object Error]'
    ? (value as Error)
    : new ThrownValueError(value);
}

/**
 * The batcher was closed; create a new one to push or work again. A call that `close()` stopped
 * waiting for (Redis away) has the connection's error as `cause`.
 */
export class ClosedError extends BatchByKeyError {
  constructor(message: string, options: { cause?: unknown } = {}) {
    super('ERR_CLOSED', message);
    if (options.cause !== undefined) this.cause = options.cause;
  }
}

/**
 * Thrown by a handler: these ids (or, without `ids`, the whole slice) can never succeed, so they
 * skip the remaining attempts. The listed ids become dead letters at once and the slice's other
 * ids are retried at once; a whole slice is split to find the bad ids (or, with
 * `isolateFailures: false`, dead-lettered). BullMQ's `UnrecoverableError` counts as a whole-slice
 * PermanentError.
 */
export class PermanentError extends BatchByKeyError {
  readonly ids: readonly Id[] | undefined;
  constructor(message: string, options: { ids?: readonly (Id | number)[]; cause?: unknown } = {}) {
    super('ERR_PERMANENT', message);
    this.ids = options.ids?.map(String);
    if (options.cause !== undefined) this.cause = options.cause;
  }
}

/**
 * `ctx.fail(id, error)` named an id that is not one of its slice's ids, or was called once its
 * slice had ended (the handler had returned or thrown): the outcome it reports would belong to
 * no slice. Thrown by `ctx.fail` itself, so the handler's own code sees it where it made the call.
 */
export class NotInSliceError extends BatchByKeyError {
  constructor(message: string) {
    super('ERR_NOT_IN_SLICE', message);
  }
}

/** `progress(ticket)` or `waitFor(ticket)` for a ticket that never existed or has expired (`ticketTtlMs`). */
export class UnknownTicketError extends BatchByKeyError {
  constructor(message: string) {
    super('ERR_UNKNOWN_TICKET', message);
  }
}

/**
 * `waitFor(ticket, { timeoutMs })` ran out of time; `progress` is the last reading, undefined when
 * no read was answered in time (Redis away from the start).
 */
export class WaitTimeoutError extends BatchByKeyError {
  constructor(
    message: string,
    readonly progress: Progress | undefined,
  ) {
    super('ERR_WAIT_TIMEOUT', message);
  }
}

/** `prometheusMetrics` was called but its optional peer dependency `prom-client` is not installed. */
export class MissingDependencyError extends BatchByKeyError {
  constructor(message: string) {
    super('ERR_MISSING_DEPENDENCY', message);
  }
}

/** `createWorker` or `processor` of a producer: a batcher defined without `eachIteration`. */
export class MissingHandlerError extends BatchByKeyError {
  constructor(message: string) {
    super('ERR_MISSING_HANDLER', message);
  }
}

/**
 * A push from a batcher whose `store` differs from the one its workers (or earlier pushers) use:
 * their ids would be unreadable to each other (a list read as a set fails with WRONGTYPE).
 */
export class StoreMismatchError extends BatchByKeyError {
  constructor(message: string) {
    super('ERR_STORE_MISMATCH', message);
  }
}

/**
 * A push refused because a Redis key it would write holds another type than the one this library
 * keeps there (something else wrote it: a name clash with another application, an operator's
 * command). Nothing of the push was written, and a retry fails the same way until the key is
 * fixed. `redisKey` names that key, `found` is its type, `wanted` the type the push needs.
 */
export class WrongTypeError extends BatchByKeyError {
  constructor(
    message: string,
    readonly redisKey: string,
    readonly found: string,
    readonly wanted: string,
  ) {
    super('ERR_WRONG_TYPE', message);
  }
}

/** A push to (or a seal of) an open ticket that is sealed already. */
export class TicketSealedError extends BatchByKeyError {
  constructor(message: string) {
    super('ERR_TICKET_SEALED', message);
  }
}

/**
 * Thrown by a handler (or by `ctx.retryAfter(ms)`) when the upstream said "not now" (an HTTP 429
 * or 503 with `Retry-After`): the slice goes back to the front of the key's ids unchanged (no
 * attempt spent, no retry counted), and the whole key waits `retryAfterMs` without holding a
 * worker slot, then resumes by itself. `parseRetryAfter` reads the header.
 */
export class RateLimitedError extends BatchByKeyError {
  readonly retryAfterMs: number;
  /** 'batcher': every key of the batcher waits, not only this one (one upstream token shared by all). */
  readonly scope: 'key' | 'batcher';
  constructor(options: { retryAfterMs: number; scope?: 'key' | 'batcher'; message?: string; cause?: unknown }) {
    const ms = options?.retryAfterMs;
    if (typeof ms !== 'number' || !Number.isFinite(ms) || ms < 0 || ms > MAX_TIMER_MS) {
      throw new InvalidOptionError(`retryAfterMs must be a number of ms between 0 and ${MAX_TIMER_MS}, got ${describe(ms)}`);
    }
    super('ERR_RATE_LIMITED', options.message ?? `rate limited: retry after ${Math.ceil(ms)} ms`);
    this.retryAfterMs = Math.ceil(ms);
    if (options.scope !== undefined && options.scope !== 'key' && options.scope !== 'batcher') {
      throw new InvalidOptionError(`scope must be 'key' or 'batcher', got ${describe(options.scope)}`);
    }
    this.scope = options.scope ?? 'key';
    if (options.cause !== undefined) this.cause = options.cause;
  }
}

/** `resume(key)` for a key that is not paused (never was, or was resumed already). */
export class NotPausedError extends BatchByKeyError {
  constructor(message: string) {
    super('ERR_NOT_PAUSED', message);
  }
}

/**
 * `retireShardCount` was asked to forget a shard count that is still in use: the batcher's own
 * `shards`, a count whose queues still hold key jobs (wait for them to run, then retire it), or a
 * count a process may still push to without checking again (wait `retryAfterMs`).
 */
export class ShardsInUseError extends BatchByKeyError {
  /**
   * For a count a process checked too recently: the ms until it may be retired, unless a process
   * checks it again meanwhile (then it is in use again). Absent when the count is the caller's own
   * or still has jobs or keys: how long they take is not known, so poll `shardCounts()`.
   */
  readonly retryAfterMs?: number;
  constructor(message: string, retryAfterMs?: number) {
    super('ERR_SHARDS_IN_USE', message);
    if (retryAfterMs !== undefined) this.retryAfterMs = retryAfterMs;
  }
}

/**
 * A push would take its key past `maxPendingPerKey`: it was refused whole and wrote nothing (no
 * id, data, ticket or job, and, but for a race on a Redis Cluster, no index entry: see docs/api.md). `pending` is how many ids the key had waiting when the
 * push was judged (its pending store only: ids in flight or backing off in retry do not count),
 * `limit` the key's limit. The key's other pushes, and every other key's, go on: retry once the
 * key's workers have drained it below the limit.
 */
export class KeyBacklogFullError extends BatchByKeyError {
  constructor(
    message: string,
    readonly key: Key,
    readonly limit: number,
    readonly pending: number,
  ) {
    super('ERR_KEY_BACKLOG_FULL', message);
  }
}

/** Describes a value for an error message without dumping large inputs. */
/**
 * For an option that BullMQ spells otherwise: when `value` (an object) has BullMQ's field and not
 * ours, the sentence to end the error with; else ''. Our durations name their unit (`delayMs`);
 * BullMQ's do not (`delay`).
 * @internal
 */
export function bullmqSpelling(value: unknown, bullmqField: string, ours: string): string {
  if (typeof value !== 'object' || value === null || !(bullmqField in value) || ours in value) return '';
  return ` (BullMQ's \`${bullmqField}\` is \`${ours}\` here: every duration of this library names its unit; see docs/migrating.md)`;
}

export function describe(value: unknown): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return `an array of length ${value.length}`;
  if (typeof value === 'string') {
    return value.length > 40 ? `a string of length ${value.length}` : JSON.stringify(value);
  }
  if (typeof value === 'number' || typeof value === 'boolean' || typeof value === 'bigint') {
    return `${typeof value} ${String(value)}`;
  }
  return typeof value;
}
