import { SliceTimeoutError } from './errors';
import type { BatcherEmitter } from './events';
import type { RetrySlice } from './failures';
import { firstReason, type InterruptCheck } from './interrupt';
import type { KeyNames } from './keys';
import type { KeyLock } from './lock';
import type { RedisClient } from './scripts';
import { claim, type Settle } from './store';
import type { EachIteration, IterationContext, Key, KeyJob, SliceInfo, SliceMiddleware, StopReason, StoreKind } from './types';

/**
 * Wraps what the handler threw (or its timeout), so the run can tell a failed slice, which is
 * retried or dead-lettered, from Redis trouble on the way, which is not the slice's fault.
 */
export class SliceFailure {
  constructor(readonly error: unknown) {}
}

/** How one job run ended, when it did not throw. */
export type RunOutcome =
  /** No id left: the last slice is acked. */
  | { kind: 'drained' }
  /** Ids are pending but none is due for `waitMs` (a zset time, a failed slice's backoff); the last slice is acked. */
  | { kind: 'waiting'; waitMs: number }
  /**
   * Stopped between slices; the last slice is done but not yet acked (release acks it), or,
   * with `restore`, it gave up because of the stop and goes back to pending.
   */
  | { kind: 'stopped'; reason: StopReason; restore?: boolean }
  /** The lock was lost; nothing can be acked, the in-flight ids wait for the next holder. */
  | { kind: 'lock_lost' };

/** A slice whose handler failed, for the run to settle. */
export interface FailedSlice {
  slice: SliceInfo;
  /** The failed slice these ids were a retry of, if any. */
  previous: RetrySlice | undefined;
  error: unknown;
  /** Unique per slice; names the parts it is split into. */
  sliceId: string;
  durationMs: number;
}

export interface IterationParams {
  client: RedisClient;
  store: StoreKind;
  names: KeyNames;
  lock: KeyLock;
  sliceSize: number;
  sliceTimeoutMs: number;
  handler: EachIteration;
  around: readonly SliceMiddleware[];
  events: BatcherEmitter;
  key: Key;
  job: KeyJob;
  /** Aborted on shutdown or a lost lock; each slice's ctx.signal also aborts on its timeout. */
  stop: AbortSignal;
  interrupts: readonly InterruptCheck[];
  /** Retries, splits or dead-letters a failed slice; false when the lock was lost first. */
  settleFailure: (failed: FailedSlice) => Promise<boolean>;
}

/**
 * The loop of one job run: claim a slice (acking the previous one in the same call), run the
 * handler, then ask the interrupt checks. Progress is committed only after a slice succeeds,
 * and the budget is checked only between slices (as job-iteration does). A failed slice is
 * settled on its own (see failures.ts) and the run goes on with the key's other ids.
 * The first claim of a run restores ids a crashed run left in flight.
 */
export async function iterate(p: IterationParams): Promise<RunOutcome> {
  // One signal per run: a timed-out slice ends the run, so it never needs resetting.
  const timeout = new AbortController();
  const signal = AbortSignal.any([p.stop, timeout.signal]);
  let settle: Settle = 'restore';
  for (let n = 1; ; n++) {
    const sliceId = `${p.lock.value}:${n}`;
    const claimed = await claim(p.client, p.store, p.names, p.lock.value, sliceId, settle, p.sliceSize);
    if (!claimed.held) return { kind: 'lock_lost' };
    if (claimed.ids.length === 0) {
      return claimed.waitMs > 0 ? { kind: 'waiting', waitMs: claimed.waitMs } : { kind: 'drained' };
    }
    settle = 'ack';
    const slice: SliceInfo = { key: p.key, ids: claimed.ids, attempt: (claimed.retry?.attempts ?? 0) + 1, job: p.job };
    const started = performance.now();
    try {
      await runSlice(p, { ...slice, signal }, timeout);
      if (p.events.wants('slice:done')) p.events.emit('slice:done', { ...slice, durationMs: performance.now() - started });
    } catch (thrown) {
      // Redis trouble in a claim is not the slice's fault: the safety net in runKey retries the run.
      if (!(thrown instanceof SliceFailure)) throw thrown;
      // A handler that gives up because ctx.signal fired for a shutdown or a lost lock is
      // stopping, not failing (a slice timeout is a failure).
      if (p.lock.signal.aborted) return { kind: 'lock_lost' };
      if (p.stop.aborted) return { kind: 'stopped', reason: 'shutdown', restore: true };
      const failed = { slice, previous: claimed.retry, error: thrown.error, sliceId, durationMs: performance.now() - started };
      if (!(await p.settleFailure(failed))) return { kind: 'lock_lost' };
      // The abandoned handler may still run; a fresh run gets a fresh signal.
      if (timeout.signal.aborted) return { kind: 'stopped', reason: 'slice_timeout' };
    }
    const reason = firstReason(p.interrupts);
    if (reason === 'lock_lost') return { kind: 'lock_lost' };
    if (reason) return { kind: 'stopped', reason };
  }
}

type SliceContext = IterationContext & SliceInfo;

/**
 * Runs the handler (inside the `around` middlewares) on one slice, but waits at most
 * `sliceTimeoutMs`: a handler that never returns would otherwise hold the key (and a worker
 * slot) forever. On timeout ctx.signal aborts with a SliceTimeoutError and the slice counts as
 * failed; the handler is not killed.
 */
async function runSlice(p: IterationParams, ctx: SliceContext, timeout: AbortController): Promise<void> {
  try {
    const result = p.around.length === 0 ? p.handler(ctx.ids as string[], ctx) : wrap(p.around, 0, ctx, p.handler);
    if (result instanceof Promise) await withTimeout(p, result, timeout);
  } catch (error) {
    throw new SliceFailure(error);
  }
}

function wrap(around: readonly SliceMiddleware[], i: number, ctx: SliceContext, handler: EachIteration): Promise<void> {
  const middleware = around[i];
  if (!middleware) return Promise.resolve(handler(ctx.ids as string[], ctx));
  return middleware(ctx, () => wrap(around, i + 1, ctx, handler));
}

async function withTimeout(p: IterationParams, result: Promise<void>, timeout: AbortController): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  const timedOut = new Promise<never>((_, reject) => {
    timer = setTimeout(() => {
      const error = new SliceTimeoutError(`a slice of key ${JSON.stringify(p.key)} ran longer than sliceTimeoutMs (${p.sliceTimeoutMs} ms)`);
      timeout.abort(error);
      reject(error);
    }, p.sliceTimeoutMs);
  });
  try {
    await Promise.race([result, timedOut]);
  } finally {
    clearTimeout(timer);
  }
}
