/**
 * The longest delay Node's timers take (2^31 - 1 ms, about 24.8 days): a longer one fires after
 * 1 ms, so every duration that ends up in a timer (or in a Redis PX beside one) is bounded by it.
 */
export const MAX_TIMER_MS = 2 ** 31 - 1;

/** Lanes per key at most: a run's first claim looks for this many lanes a crashed run left behind. */
export const MAX_CONCURRENCY_PER_KEY = 16;
