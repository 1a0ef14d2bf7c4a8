import { createBatcher } from './batcher';
import type { Batcher, BatchByKeyOptions, EachIteration } from './core/types';

/**
 * Defines a batcher: `performBatchLater(ids)` stores ids per key, and one BullMQ job per key
 * works through them in slices under a runtime budget, yielding to other keys. Without
 * `eachIteration` it is a producer (as BullMQ's `Queue` beside its `Worker`): it pushes and
 * reads, and `createWorker`/`processor` throw a MissingHandlerError.
 */
export function batchByKey<Data = unknown>(options: BatchByKeyOptions<Data>): Batcher<Data> {
  // The batcher moves data as opaque JSON; only the caller's types know its shape.
  const handler = options?.eachIteration as EachIteration | undefined;
  return createBatcher(options as BatchByKeyOptions, handler === undefined ? undefined : () => handler) as Batcher<Data>;
}

export { BatchByKey } from './class-form';
export { dashboard, type DashboardHandler, type DashboardOptions } from './ops/dashboard';
export {
  bullBoardAdapters,
  type BullBoardAdapterClass,
  type BullBoardQueueAdapter,
  type KeyJobLevel,
  type KeyJobView,
} from './ops/bull-board';
export { prometheusMetrics, type MetricsRegistry, type PrometheusMetrics, type PrometheusOptions } from './ops/metrics';
export { sliceTracing, SLICE_SPAN, PUSH_SPAN } from './ops/tracing';
export { pinoLogger, type PinoLike } from './core/logger';
export { withKey, currentKey } from './push/context';
export { TICKET_JOB_NAME } from './storage/ticket-outbox';
export { parseRetryAfter } from './engine/flow';
export { MAX_DATA_BYTES, MAX_ID_LENGTH, MAX_KEY_LENGTH } from './core/input';
export { DEFAULTS, MAX_TIMER_MS, WORKER_DEFAULTS } from './options';
export { JOB_NAME } from './storage/job';
export {
  BatchByKeyError,
  InvalidOptionError,
  InvalidIdsError,
  InvalidKeyError,
  MissingKeyError,
  LockLostError,
  ShutdownError,
  ClosedError,
  SliceTimeoutError,
  CallbackFailedError,
  CallbackTimeoutError,
  SliceCrashedError,
  ThrownValueError,
  PermanentError,
  UnknownTicketError,
  WaitTimeoutError,
  PushTimeoutError,
  PushOutcomeUnknownError,
  MissingDependencyError,
  RateLimitedError,
  NotPausedError,
  MissingHandlerError,
  StoreMismatchError,
  TicketSealedError,
  ShardsInUseError,
  KeyBacklogFullError,
  NotInSliceError,
  WrongTypeError,
  type ErrorCode,
} from './core/errors';
export type * from './core/types';
