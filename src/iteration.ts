import { SliceTimeoutError } from './errors';
import { firstReason, type InterruptCheck } from './interrupt';
import type { KeyNames } from './keys';
import type { KeyLock } from './lock';
import type { RedisClient } from './scripts';
import { claim, type Settle } from './store';
import type { EachIteration, Id, IterationContext, Key, KeyJob, StopReason, StoreKind } from './types';

/**
 * Wraps what the handler threw (or its timeout), so the run can tell a failed slice, which counts
 * toward `attempts`, from Redis trouble on the way, which does not.
 */
export class SliceFailure {
  constructor(readonly error: unknown) {}
}

/** How one job run ended, when it did not throw. */
export type RunOutcome =
  /** No id left: the last slice is acked. */
  | { kind: 'drained' }
  /** zset: ids are pending but none is ready for `waitMs`; the last slice is acked. */
  | { kind: 'waiting'; waitMs: number }
  /**
   * Stopped between slices; the last slice is done but not yet acked (release acks it), or,
   * with `restore`, it gave up because of the stop and goes back to pending.
   */
  | { kind: 'stopped'; reason: StopReason; restore?: boolean }
  /** The lock was lost; nothing can be acked, the in-flight ids wait for the next holder. */
  | { kind: 'lock_lost' };

export interface IterationParams {
  client: RedisClient;
  store: StoreKind;
  names: KeyNames;
  lock: KeyLock;
  sliceSize: number;
  sliceTimeoutMs: number;
  handler: EachIteration;
  key: Key;
  job: KeyJob;
  /** Aborted on shutdown or a lost lock; each slice's ctx.signal also aborts on its timeout. */
  stop: AbortSignal;
  interrupts: readonly InterruptCheck[];
}

/**
 * The loop of one job run: claim a slice (acking the previous one in the same call), run the
 * handler, then ask the interrupt checks. Progress is committed only after a slice succeeds,
 * and the budget is checked only between slices (as job-iteration does).
 * The first claim of a run restores ids a crashed run left in flight.
 */
export async function iterate(p: IterationParams): Promise<RunOutcome> {
  // One context per run: a timed-out slice ends the run, so its signal never needs resetting.
  const timeout = new AbortController();
  const ctx: IterationContext = { key: p.key, job: p.job, signal: AbortSignal.any([p.stop, timeout.signal]) };
  let settle: Settle = 'restore';
  for (let n = 1; ; n++) {
    const claimed = await claim(p.client, p.store, p.names, p.lock.value, `${p.lock.value}:${n}`, settle, p.sliceSize);
    if (!claimed.held) return { kind: 'lock_lost' };
    if (claimed.ids.length === 0) {
      return claimed.waitMs > 0 ? { kind: 'waiting', waitMs: claimed.waitMs } : { kind: 'drained' };
    }
    await runSlice(p, ctx, timeout, claimed.ids);
    settle = 'ack';
    const reason = firstReason(p.interrupts);
    if (reason === 'lock_lost') return { kind: 'lock_lost' };
    if (reason) return { kind: 'stopped', reason };
  }
}

/**
 * Runs the handler on one slice, but waits for it at most `sliceTimeoutMs`: a handler that never
 * returns would otherwise hold the key (and a worker slot) forever. On timeout ctx.signal aborts
 * with a SliceTimeoutError and the slice counts as failed; the handler is not killed.
 */
async function runSlice(p: IterationParams, ctx: IterationContext, timeout: AbortController, ids: Id[]): Promise<void> {
  try {
    await callHandler(p, ctx, timeout, ids);
  } catch (error) {
    throw new SliceFailure(error);
  }
}

async function callHandler(p: IterationParams, ctx: IterationContext, timeout: AbortController, ids: Id[]): Promise<void> {
  const result = p.handler(ids, ctx);
  if (!(result instanceof Promise)) return;
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
