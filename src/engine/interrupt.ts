import { LockLostError, ShutdownError } from '../core/errors';
import { Stop } from '../core/stop';
import type { StopReason } from '../core/types';

export { Stop };

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
 * Why a run was stopped, as a stop reason: a lost lock or a shutdown; undefined while it was not,
 * or for a slice's timeout, which ends its run by itself.
 */
export function stopReasonOf(stop: Stop): 'lock_lost' | 'shutdown' | undefined {
  if (!stop.aborted) return undefined;
  if (stop.reason instanceof LockLostError) return 'lock_lost';
  if (stop.reason instanceof ShutdownError) return 'shutdown';
  return undefined;
}

export function stopped(stop: Stop): InterruptCheck {
  return () => stopReasonOf(stop);
}

/** The first reason any check gives, in the order given. */
export function firstReason(checks: readonly InterruptCheck[], slice: SliceEnd): StopReason | undefined {
  for (const check of checks) {
    const reason = check(slice);
    if (reason) return reason;
  }
  return undefined;
}
