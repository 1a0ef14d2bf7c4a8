import type { StopReason } from './types';

/** Asked between slices; returns why the run should stop now, or undefined to go on. */
export type InterruptCheck = () => StopReason | undefined;

export function maxRuntime(startedAt: number, maxRuntimeMs: number): InterruptCheck {
  return () => (Date.now() - startedAt >= maxRuntimeMs ? 'max_runtime' : undefined);
}

export function aborted(signal: AbortSignal, reason: StopReason): InterruptCheck {
  return () => (signal.aborted ? reason : undefined);
}

/** The first reason any check gives, in the order given. */
export function firstReason(checks: readonly InterruptCheck[]): StopReason | undefined {
  for (const check of checks) {
    const reason = check();
    if (reason) return reason;
  }
  return undefined;
}
