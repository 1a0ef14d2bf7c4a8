import type { Key } from '../core/types';

/**
 * The name of every key job this library adds; other names go to the fallback processor. The
 * claim scripts know a key job by it (see scripts/includes/fused-claim.lua).
 */
export const JOB_NAME = 'batch-by-key';

/**
 * Builds every Redis key name of a batcher, so no call site spells one.
 *
 * A user's key is percent-encoded (injective, and never contains `{`, `}` or `:`) and wrapped
 * in the only hash tag of the name, so all keys of one logical key hash to one Redis Cluster
 * slot, different logical keys spread over slots, and no two logical keys share a name.
 */
export interface KeyNames {
  /** The key's base name, which every name below extends: the claim scripts get only this (see KEY_SUFFIXES). */
  base: string;
  pending: string;
  /**
   * The key's high-priority ids waiting (a push with `priority: 'high'`), of the same type as
   * `pending`, with their own push marks (`pushMarksHigh`, as `pushMarks`): claims take from it
   * first, and read it only while the key carries `extras` (see includes/priority.lua).
   */
  pendingHigh: string;
  pushMarksHigh: string;
  /** Set ('1') while the slice in flight was claimed from `pendingHigh`: a restore puts it back there. */
  inFlightHigh: string;
  /**
   * The list store's high-priority pushes' tickets and data (as `tracked` and `payloads`): a list
   * keeps each push of an id apart, so a high push of an id also pending at normal keeps its own
   * (see includes/priority.lua). The set and zset stores keep one copy of an id, and its data in
   * `payloads` whatever its level.
   */
  trackedHigh: string;
  payloadsHigh: string;
  inFlight: string;
  lock: string;
  /** The id of the last claim applied, which makes a resent claim a no-op. */
  lastClaim: string;
  /** Failed slices backing off: a sorted set of slice ids scored by the time they are due again. */
  retry: string;
  /** Slice id → JSON `RetrySlice` (its ids and failure history), for the slices in `retry`. */
  retrySlices: string;
  /**
   * The data of failed slices' ids: `${sliceId}\n${id}` → the payloads the id's failed run had
   * (see includes/payloads.lua), so data follows its id through a retry and a push of the same
   * id meanwhile neither takes it nor gives it its own.
   */
  retryData: string;
  /** Tracked ids waiting (pending or backing off): id → the tickets of its pushes, space-separated. */
  tracked: string;
  /** The same for the ids of the slice in flight. */
  trackedInFlight: string;
  /**
   * When the pending ids were pushed, for lag. List store: a list of `sinceMs count`, oldest
   * first, started by the push that finds pending empty and written by claims, never by the
   * pushes between (see includes/marks.lua). Set store: a string, the time pending last went from
   * empty to non-empty. Zset store: unused (the scores are the ready times).
   */
  pushMarks: string;
  /**
   * The mark of the oldest id of the slice in flight (by `pushMarks`), for a restore to put back:
   * the list store's, a list of it alone (moved there by LMOVE); the others', a string.
   */
  inFlightMark: string;
  /** The JSON of the failed slice in flight, if it is one: a run that dies keeps its history. */
  inFlightSlice: string;
  /** Prefix of a ticket's hash (`${ticketPrefix}${ticket}`: total, done, failed) and its errors list (`…:errors`). */
  ticketPrefix: string;
  /** Set while an operator paused the key (`pause`): its value is the end (ms, Redis clock), '' until resumed; PX when timed. */
  paused: string;
  /** Set while the key waits out a rate limit or a handler's `retryAfter`: nothing is claimed until it expires (PX). */
  hold: string;
  /** How many times in a row the key's slices asked to wait (`retryAfter`) with none succeeding between: the hold's floor doubles with each. */
  retryAfterStreak: string;
  /** Settled tickets (their ids) whose callback job is still to be added: a list, drained by workers and the recovery sweep. */
  settledTickets: string;
  /** Data per id waiting: id -> its payloads, each JSON text and a newline, oldest first (see includes/payloads.lua). */
  payloads: string;
  /** The same for the ids of the slice in flight. */
  payloadsInFlight: string;
  /**
   * Trace context per id waiting, written only by pushes made inside a sampled OpenTelemetry span:
   * id -> the W3C `traceparent` of its first such push while it waits (see includes/traces.lua).
   * A claim takes its ids' entries along in its reply; none stays in flight.
   */
  traces: string;
  /**
   * Set by the claims of lanes other than 0 (a run with `concurrencyPerKey` > 1), deleted when
   * such a run releases the key after acking every lane: while it exists, a run's first claim
   * looks for slices a dead run left in those lanes (without it, lane 0's names alone).
   */
  lanes: string;
  /**
   * Set (to '1') by every call that writes one of the key's uncommon keys, those a key that uses
   * no pause, hold, failed slice, ticket, data, trace context, lanes or priority never has: paused,
   * hold, retryAfterStreak, retry, retrySlices, retryData, tracked, payloads, traces, lanes and
   * pendingHigh (and, claimed from them, trackedInFlight, payloadsInFlight, inFlightSlice and
   * inFlightHigh). A claim or push that
   * finds it absent reads none of them: one name looked up instead of up to eleven, on the path
   * every key takes. A run's last claim deletes it once none of them exists (see includes/extras.lua).
   */
  extras: string;
  /**
   * The rate limit's window: a list of `claimMs count`, one per claim (or claims within 0.5 % of a
   * window), oldest first (see includes/flow.lua).
   */
  rateLog: string;
  /** The sum of the window's counts. */
  rateUsed: string;
}

/**
 * A key's job pointer is its BullMQ queue's prefix followed by this and the encoded key: a string,
 * the id of the key's job, written by the calls that add and complete it. It lives in the queue's
 * slot, so a Cluster's add writes it with the add. A pointer to a job that is gone, has ended or
 * is not ours is no job (scripts/includes/key-job.lua): a completion BullMQ makes with its own
 * call leaves the pointer behind, which the next add overwrites and the recovery sweep's walk
 * deletes (forget-pointers.lua).
 */
export const JOB_POINTER = 'bbk:job:';

/**
 * The key whose job pointer on the queue whose prefix is `queuePrefix` is named `name` (see
 * `jobPointerOf`); undefined for any other name.
 */
export function keyOfJobPointer(queuePrefix: string, name: string): Key | undefined {
  const head = `${queuePrefix}${JOB_POINTER}`;
  return name.startsWith(head) ? decodedKey(name.slice(head.length)) : undefined;
}

/** The pointer to the key's job on the queue whose prefix is `queuePrefix` (see `JOB_POINTER`). */
export function jobPointerOf(queuePrefix: string, key: Key): string {
  return `${queuePrefix}${JOB_POINTER}${encodeKey(key)}`;
}

/**
 * Every per-key name is its key's base (`${root}:{${encodeKey(key)}}`) followed by one of these
 * suffixes. The claim scripts get the base alone and derive the rest in Lua from this same table
 * (the loader generates their `key-names` include from it: see scripts/index.ts), so a name is
 * spelled here only, and a claim sends one key name, not nineteen.
 */
export const KEY_SUFFIXES = {
  pending: ':pending',
  inFlight: ':inflight',
  lock: ':lock',
  lastClaim: ':claim',
  retry: ':retry',
  retrySlices: ':retry:slices',
  retryData: ':retry:data',
  tracked: ':tracked',
  trackedInFlight: ':tracked:inflight',
  ticketPrefix: ':ticket:',
  pushMarks: ':marks',
  inFlightMark: ':marks:inflight',
  inFlightSlice: ':inflight:slice',
  paused: ':paused',
  hold: ':hold',
  retryAfterStreak: ':hold:streak',
  rateLog: ':rate',
  rateUsed: ':rate:used',
  settledTickets: ':ticket-outbox',
  payloads: ':data',
  payloadsInFlight: ':data:inflight',
  traces: ':traces',
  lanes: ':lanes',
  pendingHigh: ':pending:high',
  pushMarksHigh: ':marks:high',
  inFlightHigh: ':inflight:high',
  trackedHigh: ':tracked:high',
  payloadsHigh: ':data:high',
  extras: ':extras',
} as const satisfies Record<Exclude<keyof KeyNames, 'base'>, string>;

/**
 * The names each lane of a run has of its own (with `concurrencyPerKey` > 1): lane n's are lane
 * 0's followed by `:n`, which the claim scripts rely on to recover every lane of a dead run.
 */
export const LANE_NAMES = [
  'inFlight',
  'lastClaim',
  'trackedInFlight',
  'inFlightMark',
  'inFlightSlice',
  'payloadsInFlight',
  'inFlightHigh',
] as const;

/** The names a lane of a run uses for its own slice; lane 0 is the key's own names. */
export function laneNames(names: KeyNames, lane: number): KeyNames {
  if (lane === 0) return names;
  const own: Partial<KeyNames> = {};
  for (const field of LANE_NAMES) own[field] = `${names[field]}:${lane}`;
  return { ...names, ...own };
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

/**
 * The batcher-wide limits' state (see engine/global-limits.ts); these keys share one hash slot,
 * the dead letters', so one small script sees them all.
 */
export interface LimitNames {
  /** Running lanes' leases under `globalConcurrency`: member `${lock}:${lane}`, scored by expiry (ms, Redis clock). */
  leases: string;
  /** Key jobs waiting for a place: member `${queue}|${jobId}`, scored by level * 2^32 + arrival (light first, then first come). */
  waiters: string;
  /** The same members, scored by when the entry lapses if its job never comes back. */
  waitersUntil: string;
  /** The same members, scored by when they first waited (for the time spent waiting). */
  waitersSince: string;
  /** The arrival counter of `waiters`. */
  waitSeq: string;
  /** `globalRateLimit`'s sliding window: its log and its sum (as a key's rateLog and rateUsed). */
  rateLog: string;
  rateUsed: string;
  /** Key jobs the rate window refused, scored as `waiters`: woken when a run gives back ids it reserved and did not claim. */
  rateWaiters: string;
  /** Set (PX) while `ctx.retryAfter(ms, { scope: 'batcher' })` holds every key. */
  hold: string;
  /** A hash of counters: `waitedMs`, the time keys spent waiting for a limit; `waits`, how many times one did. */
  counters: string;
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

  /** Same tag as `dead`: the limits' scripts touch several of these keys, which must share a slot. */
  get limits(): LimitNames {
    const base = `${this.root}:{${this.root}}:limits`;
    return {
      leases: `${base}:leases`,
      waiters: `${base}:waiters`,
      waitersUntil: `${base}:waiters:until`,
      waitersSince: `${base}:waiters:since`,
      waitSeq: `${base}:waiters:seq`,
      rateLog: `${base}:rate`,
      rateUsed: `${base}:rate:used`,
      rateWaiters: `${base}:rate:waiters`,
      hold: `${base}:hold`,
      counters: `${base}:counters`,
    };
  }

  /** A SCAN pattern that matches every name of every key's (`forKey`), and a few others (`keyOfName` tells). */
  get keyNamesPattern(): string {
    return `${this.root.replace(/[*?[\]\\]/g, (c) => `\\${c}`)}:{*`;
  }

  /** The key whose name (one of `forKey`'s) this is; undefined for a name of no key's. */
  keyOfName(name: string): Key | undefined {
    const head = `${this.root}:{`;
    if (!name.startsWith(head)) return undefined;
    const end = name.indexOf('}', head.length);
    const encoded = end === -1 ? '' : name.slice(head.length, end);
    // The dead letters' and history's tag holds a ':', which an encoded key never does.
    if (encoded === '' || encoded.includes(':')) return undefined;
    return decodedKey(encoded);
  }

  /**
   * Keys whose ids may have no job, scored by when they were listed (recovery sweeps it): the
   * index of a batcher with one shard; with more, each shard has its own (see shards.ts). A push
   * lists its key unless it adds the key's job in the same call; so do a run that fails or is
   * handed back, and the full sweep (`recover({ full: true })`).
   */
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

  /** Every run builds these: one literal (not a loop over KEY_SUFFIXES) keeps it a plain, fast object. */
  forKey(key: Key): KeyNames {
    const base = `${this.root}:{${encodeKey(key)}}`;
    const s = KEY_SUFFIXES;
    return {
      base,
      pending: base + s.pending,
      inFlight: base + s.inFlight,
      lock: base + s.lock,
      lastClaim: base + s.lastClaim,
      retry: base + s.retry,
      retrySlices: base + s.retrySlices,
      retryData: base + s.retryData,
      tracked: base + s.tracked,
      trackedInFlight: base + s.trackedInFlight,
      ticketPrefix: base + s.ticketPrefix,
      pushMarks: base + s.pushMarks,
      inFlightMark: base + s.inFlightMark,
      inFlightSlice: base + s.inFlightSlice,
      paused: base + s.paused,
      hold: base + s.hold,
      retryAfterStreak: base + s.retryAfterStreak,
      rateLog: base + s.rateLog,
      rateUsed: base + s.rateUsed,
      settledTickets: base + s.settledTickets,
      payloads: base + s.payloads,
      payloadsInFlight: base + s.payloadsInFlight,
      traces: base + s.traces,
      lanes: base + s.lanes,
      extras: base + s.extras,
      pendingHigh: base + s.pendingHigh,
      pushMarksHigh: base + s.pushMarksHigh,
      inFlightHigh: base + s.inFlightHigh,
      trackedHigh: base + s.trackedHigh,
      payloadsHigh: base + s.payloadsHigh,
    };
  }
}

/** A ticket's errors list is its hash's name followed by this (the scripts get it too). */
export const TICKET_ERRORS_SUFFIX = ':errors';

/**
 * A key's ticket channel is its ticket prefix followed by this: the scripts publish a ticket's id
 * on it whenever its counts change (see includes/tracking.lua). No ticket id (a UUID) is this.
 */
export const TICKET_CHANNEL_SUFFIX = 'events';

/** The pub/sub channel of a key's tickets (a channel, not a key: it holds nothing). */
export function ticketChannel(names: KeyNames): string {
  return `${names.ticketPrefix}${TICKET_CHANNEL_SUFFIX}`;
}

/** The hash of ticket `id` of a key (its errors list: `ticketErrors`). */
export function ticketHash(names: KeyNames, id: string): string {
  return `${names.ticketPrefix}${id}`;
}

/** The errors list of ticket `id` of a key: at most MAX_TICKET_ERRORS of its dead ids' errors. */
export function ticketErrors(names: KeyNames, id: string): string {
  return `${ticketHash(names, id)}${TICKET_ERRORS_SUFFIX}`;
}

/** The sorted set of one key's dead letters (fields by time of last failure). */
export function deadLettersOf(dead: DeadNames, key: Key): string {
  return `${dead.ofKey}${encodeKey(key)}`;
}

/** A key as every name of its keys carries it. Throws URIError on lone surrogates (validated earlier). */
export function encodeKey(key: Key): string {
  return encodeURIComponent(key);
}

/** The key `encoded` (as `encodeKey` writes it) stands for; undefined for text it did not write. */
function decodedKey(encoded: string): Key | undefined {
  try {
    return decodeURIComponent(encoded);
  } catch {
    return undefined;
  }
}
