/**
 * Runs every task `repeats` times in rounds (each round runs every task once, in order), so a
 * slow patch of a shared machine hits every system alike instead of one system's runs. Returns
 * each task's runs, in task order.
 */
export async function inRounds<T>(tasks: readonly (() => Promise<T>)[], repeats: number): Promise<T[][]> {
  const runs: T[][] = tasks.map(() => []);
  for (let round = 0; round < repeats; round++) {
    for (const [i, task] of tasks.entries()) runs[i]!.push(await task());
  }
  return runs;
}

/** The run with the median `value` (the lower middle for an even count). */
export function medianBy<T>(runs: readonly T[], value: (run: T) => number): T {
  if (runs.length === 0) throw new Error('medianBy needs at least one run');
  const sorted = [...runs].sort((a, b) => value(a) - value(b));
  return sorted[Math.floor((sorted.length - 1) / 2)]!;
}
