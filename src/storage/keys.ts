import type { Key } from '../core/types';

/**
 * Builds every Redis key name of a batcher, so no call site spells one.
 *
 * A user's key is percent-encoded (injective, and never contains `{`, `}` or `:`) and wrapped
 * in the only hash tag of the name, so all keys of one logical key hash to one Redis Cluster
 * slot, different logical keys spread over slots, and no two logical keys share a name.
 */
export interface KeyNames {
  pending: string;
  inFlight: string;
  lock: string;
  /** The id of the last claim applied, which makes a resent claim a no-op. */
  lastClaim: string;
  /** Failed slices backing off: a sorted set of slice ids scored by the time they are due again. */
  retry: string;
  /** Slice id → JSON `RetrySlice` (its ids and failure history), for the slices in `retry`. */
  retrySlices: string;
  /** Tracked ids waiting (pending or backing off): id → the tickets of its pushes, space-separated. */
  tracked: string;
  /** The same for the ids of the slice in flight. */
  trackedInFlight: string;
  /**
   * When the pending ids were pushed, for lag. List store: a list of `pushMs count`, one per
   * push, oldest first, consumed by claims. Set store: a string, the time pending last went from
   * empty to non-empty. Zset store: unused (the scores are the ready times).
   */
  pushMarks: string;
  /** The push time of the oldest id of the slice in flight (by `pushMarks`), for a restore to put back. */
  inFlightMark: string;
  /** The JSON of the failed slice in flight, if it is one: a run that dies keeps its history. */
  inFlightSlice: string;
  /** Prefix of a ticket's hash (`${ticketPrefix}${ticket}`: total, done, failed) and its errors list (`…:errors`). */
  ticketPrefix: string;
  /** Set while an operator paused the key (`pause`): its value is the end (ms, Redis clock), '' until resumed; PX when timed. */
  paused: string;
  /** Set while the key waits out a rate limit or a handler's `retryAfter`: nothing is claimed until it expires (PX). */
  hold: string;
  /** Settled tickets (their ids) whose callback job is still to be added: a list, drained by workers and the recovery sweep. */
  settledTickets: string;
  /** Data per id waiting: id -> its payloads, each JSON text and a newline, oldest first (see includes/payloads.lua). */
  payloads: string;
  /** The same for the ids of the slice in flight. */
  payloadsInFlight: string;
  /**
   * The rate limit's window: a list of `claimMs count`, one per claim (or claims within 0.5 % of a
   * window), oldest first (see includes/flow.lua).
   */
  rateLog: string;
  /** The sum of the window's counts. */
  rateUsed: string;
}

/**
 * The names a lane of a run uses for its own slice (with `concurrencyPerKey` > 1); lane 0 is the
 * key's own names. Lane n's are lane 0's followed by `:n`, which the claim scripts rely on to
 * recover every lane of a dead run.
 */
export function laneNames(names: KeyNames, lane: number): KeyNames {
  if (lane === 0) return names;
  return {
    ...names,
    inFlight: laneInFlight(names, lane),
    lastClaim: `${names.lastClaim}:${lane}`,
    trackedInFlight: `${names.trackedInFlight}:${lane}`,
    inFlightMark: `${names.inFlightMark}:${lane}`,
    inFlightSlice: `${names.inFlightSlice}:${lane}`,
    payloadsInFlight: `${names.payloadsInFlight}:${lane}`,
  };
}

/** A lane's in-flight ids alone (`laneNames(names, lane).inFlight`, without the rest). */
export function laneInFlight(names: KeyNames, lane: number): string {
  return lane === 0 ? names.inFlight : `${names.inFlight}:${lane}`;
}

/** The batcher's dead letters; these keys share one hash slot of their own. */
export interface DeadNames {
  /** Field `${encodeKey(key)}:${id}` → JSON entry. */
  entries: string;
  /** The same fields, scored by the time of their last failure (oldest are evicted first). */
  byTime: string;
  /** The same fields, scored by attempts. */
  byAttempts: string;
  /** Per key: `${ofKey}${encodeKey(key)}` holds that key's fields, scored by time. */
  ofKey: string;
  /** How many dead letters the cap has evicted (a counter). */
  evicted: string;
}

/** The batcher's sampled history (see history.ts); these keys share one hash slot, the dead letters'. */
export interface HistoryNames {
  /** The samples, oldest first, capped at the retention (a list; each entry starts with its time). */
  series: string;
  /** The start (ms, Redis clock) of the last interval a worker claimed to sample. */
  claim: string;
  /** Ids processed by every worker (each process adds its count once per interval). */
  processed: string;
}

export class Keyspace {
  /** `${prefix}:${name}:bbk`, with any braces of the prefix dropped (see below). */
  readonly root: string;

  constructor(prefix: string, name: string) {
    // Redis Cluster hashes the first {tag} of a name; a BullMQ prefix like '{bull}' must not
    // become it, or every key of every account would land in one slot.
    this.root = `${prefix.replace(/[{}]/g, '')}:${name}:bbk`;
  }

  /**
   * Their hash tag holds a ':', which an encoded key never does, so it is never a key's tag,
   * and a batcher's dead letters sit together in one slot.
   */
  get dead(): DeadNames {
    const base = `${this.root}:{${this.root}}`;
    return {
      entries: `${base}:dead`,
      byTime: `${base}:dead:by-time`,
      byAttempts: `${base}:dead:by-attempts`,
      ofKey: `${base}:dead:of:`,
      evicted: `${base}:dead:evicted`,
    };
  }

  /** Same tag as `dead`: the sampling scripts touch two of these keys, which must share a slot. */
  get history(): HistoryNames {
    const base = `${this.root}:{${this.root}}:history`;
    return { series: base, claim: `${base}:claim`, processed: `${base}:processed` };
  }

  /** Keys that had pushes recently, scored by the time of the last push (recovery sweeps it). */
  get index(): string {
    return `${this.root}:keys`;
  }

  /** What producers and workers must agree on (the store), recorded by the first of them (see agreement.ts). */
  get config(): string {
    return `${this.root}:config`;
  }

  /** Paused keys, scored by the end of their pause (ms since the epoch; +inf until resumed), for `paused()`. */
  get pausedIndex(): string {
    return `${this.root}:paused`;
  }

  forKey(key: Key): KeyNames {
    const base = `${this.root}:{${encodeKey(key)}}`;
    return {
      pending: `${base}:pending`,
      inFlight: `${base}:inflight`,
      lock: `${base}:lock`,
      lastClaim: `${base}:claim`,
      retry: `${base}:retry`,
      retrySlices: `${base}:retry:slices`,
      tracked: `${base}:tracked`,
      trackedInFlight: `${base}:tracked:inflight`,
      ticketPrefix: `${base}:ticket:`,
      pushMarks: `${base}:marks`,
      inFlightMark: `${base}:marks:inflight`,
      inFlightSlice: `${base}:inflight:slice`,
      paused: `${base}:paused`,
      hold: `${base}:hold`,
      rateLog: `${base}:rate`,
      rateUsed: `${base}:rate:used`,
      settledTickets: `${base}:ticket-outbox`,
      payloads: `${base}:data`,
      payloadsInFlight: `${base}:data:inflight`,
    };
  }
}

/** The hash of ticket `id` of a key (its errors list is this followed by `:errors`). */
export function ticketHash(names: KeyNames, id: string): string {
  return `${names.ticketPrefix}${id}`;
}

/** The sorted set of one key's dead letters (fields by time of last failure). */
export function deadLettersOf(dead: DeadNames, key: Key): string {
  return `${dead.ofKey}${encodeKey(key)}`;
}

/** Also the BullMQ deduplication id of the key's job. Throws URIError on lone surrogates (validated earlier). */
export function encodeKey(key: Key): string {
  return encodeURIComponent(key);
}
