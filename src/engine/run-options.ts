import type { Backoff, BatchByKeyOptions, Key, Logger, Priority, SliceMiddleware, StoreKind } from '../core/types';
import type { RateLimitOption } from './flow';
import type { FillOption } from '../core/fill';

/**
 * The options a run reads; the batcher's resolved options extend it (see options.ts). Apart from
 * run-env.ts, whose types reach redlock's, which no public type may.
 */
export interface RunOptions {
  store: StoreKind;
  sliceSize: number;
  /** Wait to fill (`minSliceSize`, `maxWaitMs`); undefined: a key's run starts at once. */
  fill: FillOption | undefined;
  concurrencyPerKey: number;
  maxRuntimeMs: number;
  scheduling: 'fair' | 'fifo';
  weight: ((key: Key) => number) | undefined;
  priority: ((key: Key) => Priority) | undefined;
  sliceTimeoutMs: number;
  lockTtlMs: number;
  shutdownTimeoutMs: number;
  attempts: number;
  backoff: Backoff;
  isolateFailures: boolean;
  around: readonly SliceMiddleware[];
  rateLimit: RateLimitOption;
  onTicketSettled: BatchByKeyOptions['onTicketSettled'];
  logger: Logger;
}
