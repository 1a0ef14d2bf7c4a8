import type { StopReason } from './types';

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

export function aborted(signal: AbortSignal, reason: StopReason): InterruptCheck {
  return () => (signal.aborted ? reason : undefined);
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
 * A controller that aborts when any of `signals` does, with that signal's reason: what
 * `AbortSignal.any` does, without its weak references and finalizer, which cost a small key's run
 * a tenth of its CPU. Plain listeners are enough here: no signal outlives its job run.
 */
export function follow(...signals: readonly AbortSignal[]): AbortController {
  const controller = new AbortController();
  for (const signal of signals) {
    if (signal.aborted) {
      controller.abort(signal.reason);
      break;
    }
    signal.addEventListener('abort', () => controller.abort(signal.reason), { once: true });
  }
  return controller;
}
