import { LockLostError, ShutdownError } from '../core/errors';
import type { StopReason } from '../core/types';

/** What a check may know of the slice that just ended. */
export interface SliceEnd {
  /** The slice had `sliceSize` ids: the key probably has more (a short one emptied pending). */
  full: boolean;
}

/** Asked between slices; returns why the run should stop now, or undefined to go on. */
export type InterruptCheck = (slice: SliceEnd) => StopReason | undefined;

export function maxRuntime(startedAt: number, maxRuntimeMs: number): InterruptCheck {
  return () => (Date.now() - startedAt >= maxRuntimeMs ? 'max_runtime' : undefined);
}

/**
 * Why a run's signal was aborted, as a stop reason: a lost lock or a shutdown; undefined while it
 * was not, or for a slice's timeout, which ends its run by itself.
 */
export function stopReasonOf(signal: AbortSignal): 'lock_lost' | 'shutdown' | undefined {
  if (!signal.aborted) return undefined;
  if (signal.reason instanceof LockLostError) return 'lock_lost';
  if (signal.reason instanceof ShutdownError) return 'shutdown';
  return undefined;
}

export function stopped(signal: AbortSignal): InterruptCheck {
  return () => stopReasonOf(signal);
}

/** The first reason any check gives, in the order given. */
export function firstReason(checks: readonly InterruptCheck[], slice: SliceEnd): StopReason | undefined {
  for (const check of checks) {
    const reason = check(slice);
    if (reason) return reason;
  }
  return undefined;
}

/**
 * A controller that aborts when `signal` does, with its reason: what `AbortSignal.any` does,
 * without its weak references and finalizer, which cost a small key's run a tenth of its CPU.
 * A plain listener is enough here: no signal outlives its job run.
 */
export function follow(signal: AbortSignal): AbortController {
  const controller = new AbortController();
  if (signal.aborted) controller.abort(signal.reason);
  else signal.addEventListener('abort', () => controller.abort(signal.reason), { once: true });
  return controller;
}
