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
  | 'ERR_SLICE_TIMEOUT';

export class BatchByKeyError extends Error {
  readonly code: ErrorCode;
  constructor(code: ErrorCode, message: string) {
    super(message);
    this.name = new.target.name;
    this.code = code;
  }
}

/** An option passed to `batchByKey`, `BatchByKey` or `createWorker` is missing or out of range. */
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

/** The batcher was closed; create a new one to push or work again. */
export class ClosedError extends BatchByKeyError {
  constructor(message: string) {
    super('ERR_CLOSED', message);
  }
}

/** Describes a value for an error message without dumping large inputs. */
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
