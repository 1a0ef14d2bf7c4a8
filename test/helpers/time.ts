/**
 * Simulated work: a handler that takes `ms`, a pusher's pace. Never a way to wait for an outcome
 * (poll with `waitFor` from ./redis, or await an event).
 */
export const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

/** Slices as `[startMs, count]`: the most ids whose slices began within any `windowMs`. */
export function busiestWindow(slices: readonly (readonly [number, number])[], windowMs: number): number {
  const sorted = [...slices].sort((a, b) => a[0] - b[0]);
  let most = 0;
  for (let i = 0; i < sorted.length; i++) {
    let sum = 0;
    for (let j = i; j < sorted.length && sorted[j]![0] < sorted[i]![0] + windowMs; j++) sum += sorted[j]![1];
    most = Math.max(most, sum);
  }
  return most;
}
