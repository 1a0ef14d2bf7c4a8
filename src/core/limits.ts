/**
 * The longest delay Node's timers take (2^31 - 1 ms, about 24.8 days): a longer one fires after
 * 1 ms, so every duration that ends up in a timer (or in a Redis PX beside one) is bounded by it.
 */
export const MAX_TIMER_MS = 2 ** 31 - 1;

/** Lanes per key at most: a run's first claim looks for this many lanes a crashed run left behind. */
export const MAX_CONCURRENCY_PER_KEY = 16;

/**
 * While this many failed slices of a key back off, the key claims no new pending ids: a key
 * whose every slice fails (an outage) waits for its retries instead of spending every id's
 * attempts, while one bad slice never holds back the rest.
 */
export const MAX_RETRYING_SLICES = 10;

/**
 * A handler's `retryAfter` (or `RateLimitedError`) holds its key at least this long, whatever it
 * asks (0, or a Retry-After date in the past from a skewed clock): an upstream that says "wait"
 * is never hammered.
 */
export const RETRY_AFTER_FLOOR_MS = 100;

/**
 * While a key's slices keep asking to wait with no slice succeeding between, the floor doubles
 * with each ask, up to this (asks for longer holds are kept as asked).
 */
export const RETRY_AFTER_MAX_BACKOFF_MS = 60_000;

/**
 * A slice's links to the pushes of its ids at most (`traceparents`): OpenTelemetry's default
 * limit of links per span, beyond which its SDK drops them anyway.
 */
export const MAX_SLICE_LINKS = 128;

/**
 * `pushesPerCall` at most: Redis runs a call's pushes one after the other, serving no other
 * client meanwhile, so a call's length is bounded (about 15 µs a single-id push).
 */
export const MAX_PUSHES_PER_CALL = 1000;

/**
 * Retries during a Redis incident (Redis refusing commands: out of memory, a busy script) wait
 * this long after the first refusal, doubling with each, up to `max`: a worker neither hammers a
 * Redis that is struggling already nor waits long once it answers again.
 */
export const INCIDENT_BACKOFF_MS = { first: 50, max: 1_000 } as const;

/** The wait before the `attempt`-th retry (1 for the first) of a call Redis refused. */
export function incidentBackoffMs(attempt: number): number {
  return Math.min(INCIDENT_BACKOFF_MS.max, INCIDENT_BACKOFF_MS.first * 2 ** Math.min(attempt - 1, 30));
}
