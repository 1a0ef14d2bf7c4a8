import { performance } from 'node:perf_hooks';

/**
 * Epoch milliseconds with sub-millisecond resolution. Push times are taken in the bench process and
 * processed times in worker processes, so both sides must read the same (wall) clock.
 */
export function now(): number {
  return performance.timeOrigin + performance.now();
}

/**
 * Burns CPU for `micros` µs. The handler cost is CPU, not a timer: it is the only cost that is
 * identical for a per-id handler (10 µs) and a per-slice handler (1 ms per 100 ids), because timers
 * cannot sleep 10 µs.
 */
export function spin(micros: number): void {
  if (micros <= 0) return;
  const until = performance.now() + micros / 1000;
  while (performance.now() < until) {
    // busy
  }
}

export const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * Polls `check` until it is true or `timeoutMs` passes. Returns false on timeout instead of throwing,
 * so a slow system is reported as timed out with partial figures and the run goes on.
 */
export async function pollUntil(check: () => boolean | Promise<boolean>, timeoutMs: number, intervalMs = 10): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (await check()) return true;
    if (Date.now() >= deadline) return false;
    await sleep(intervalMs);
  }
}

/** Rejects if `promise` has not settled in `ms`; for steps that must never hang (closing, forking). */
export async function withTimeout<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what} did not finish within ${ms} ms`)), ms);
  });
  try {
    return await Promise.race([promise, timeout]);
  } finally {
    clearTimeout(timer);
  }
}

/** A seeded PRNG (mulberry32), so every system sees the same "random" light-key push moments. */
export function seededRandom(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}
