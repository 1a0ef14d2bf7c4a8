import { MAX_TIMER_MS } from '../core/limits';
import type { BullmqCall, PushAddKind } from '../bullmq';
import type { KeyNames } from './keys';
import { CLAIM_REPLY_HEAD, REPLY } from './replies';
import { callScript, lostFunction, queueScript, runScript, type RedisClient, type ScriptArg } from './scripts';
import { argv } from './scripts/args';
import type { Fill } from '../core/fill';
import type { Id, RateLimit, StoreKind } from '../core/types';

/**
 * The per-key protocol: every call that reads or writes one key's data, one verb per Lua script,
 * each building its own key array from `KeyNames` (as BullMQ's `…Args` builders do), so the
 * processor and the iteration call verbs, never scripts with positional keys.
 *
 * One key's cycle, on a standalone Redis with a worker from `createWorker`, is one call on each side:
 * - push: `push` stores the ids (lag mark, ticket, index) and, when no run or waiting job will
 *   claim them, adds the key's job in the same call (BullMQ's add, inlined; key-job.ts `KeyJobs`
 *   after it only for a job that must wait or start at another level, and on a Cluster);
 * - run: `fetch` is BullMQ's fetch of the key's job and the run's first `claim` (lock taken, a
 *   dead run's slices recovered, first slice claimed); each next `claim` acks the previous slice
 *   and claims again; the `claim` that finds nothing releases the lock and completes the job,
 *   which fetches the next job and makes its first claim too (single-lane runs; with lanes,
 *   `release` ends the run after the last lane). Elsewhere the run's first claim is a call of its
 *   own, and BullMQ completes the job with its own call.
 * `settle`, `failSlice` and `release` end slices and runs that stop early; `dueIn` tells a
 * delayed key's wait.
 */

/** A failed slice waiting for its next run; stored as JSON in the key's retry slices. */
export interface RetrySlice {
  ids: Id[];
  /** Failed runs so far. */
  attempts: number;
  /** The slice used its attempts and is being split: each part now gets one run. */
  isolating: boolean;
  firstFailedAt: number;
  /** Its last run died with it (a crash, an OOM kill, a lost lock): that run is counted in `attempts`. */
  crashed?: boolean;
  /** Its ids' trace context, when some were pushed in a trace: each run of the slice links to those pushes. */
  traces?: Traces;
}

/**
 * The window the claim enforces: a little longer than `durationMs` (2 %, at least 20 ms, at most
 * 5 %). The limit holds for claims, but what users (and upstreams) see is when handlers start,
 * a few ms after their claim and more on a busy event loop: without the margin, a slice claimed
 * just before the window ends and one claimed just after can start inside one window. It costs
 * about 2 % of the rate.
 */
export function enforcedWindowMs(limit: RateLimit): number {
  const d = limit.durationMs;
  return Math.min(MAX_TIMER_MS, d + Math.round(Math.min(d * 0.05, Math.max(20, d * 0.02))));
}

/** What a push on a standalone Redis needs beside the key's own names (see push.lua). */
export interface JobKeys {
  /** The batcher's index of keys with recent pushes (not BullMQ's, but also outside the key's slot). */
  index: string;
  /**
   * BullMQ's queue prefix (`prefix:name:`): push.lua reads and adds the key's job under the names
   * BullMQ gives them there (the caller checked they are BullMQ's: see key-job.ts `queuePrefixOf`).
   */
  queuePrefix: string;
}

export interface PushCall {
  store: StoreKind;
  key: string;
  ids: readonly Id[];
  /** With data: how it is kept, and one JSON text per id ('' for an id pushed without). */
  payloads?: { mode: PayloadMode; json: readonly string[] };
  delayMs: number;
  /**
   * A tracked push: its ticket's id (its hash is the key's ticket prefix followed by it) and how
   * long it lives; `open` for a push to an open ticket (which must exist and not be sealed),
   * `callback` for a new ticket that wants one.
   */
  ticket?: { id: string; ttlMs: number; open?: boolean; callback?: boolean };
  /** Standalone Redis only; on a Cluster the caller writes the index and adds the job itself. */
  job?: JobKeys;
  /** With `job`: BullMQ's add of the key's job, made in the same call when it fits the key's need (see job.ts pushAdd). */
  add?: PushAdd;
  /** The W3C traceparent of the pusher's active span, recorded for each id (see includes/traces.lua). */
  traceparent?: string;
  /** The key's wait to fill, if it has one (see includes/fill.lua). */
  fill?: Fill | undefined;
  /** The key's maxPendingPerKey: a push that would take its pending ids past it is refused (see includes/backlog.lua). */
  maxPending?: number;
  /** A push with priority 'high': its ids wait in the key's high store (see includes/priority.lua). */
  high?: boolean;
}

/**
 * BullMQ's add of a key's job for a push to make in its own call (push.lua): its standard add of a
 * job that may start now, or its delayed add of a job that waits the key's maxWaitMs to fill.
 */
export interface PushAdd {
  kind: PushAddKind;
  call: BullmqCall;
}

/**
 * Why a push wrote nothing: its open ticket is unknown (or expired), or sealed; or the key's
 * backlog is full; or a Redis key it would write (`name`) holds another type (`found`) than the
 * one it needs there (`wanted`).
 */
export type PushRefusal = { reason: 'unknown_ticket' } | { reason: 'sealed_ticket' } | BacklogFull | WrongType;

/** A push refused for a key of the wrong type (see PushRefusal). */
export interface WrongType {
  reason: 'wrong_type';
  name: string;
  found: string;
  wanted: string;
}

/** A push would take its key past its maxPendingPerKey (`limit`): what the key had pending, and what the push would add. */
export interface BacklogFull {
  reason: 'backlog_full';
  limit: number;
  pending: number;
  adding: number;
}

export interface PushResult {
  /** Nothing was written. */
  refused?: PushRefusal;
  /** A run holding the key's lock, or its waiting job, will claim these ids: no job add needed. */
  covered: boolean;
  /**
   * ms until the key may claim: (zset) until its earliest id or failed slice is due, -1 when
   * none; for any store, until its ids have waited to fill, and until its pause or hold ends.
   */
  waitMs: number;
  /** The call added the key's job with `PushCall.add`: BullMQ's reply. */
  added?: unknown;
}

/** How a push's data is kept: one per push (list), or merged per id (set, zset). */
export type PayloadMode = 'list' | 'replace' | 'keep' | 'all';

/** Stores one push, whole, in one call (see push.lua), or, for a bulk push, one transaction (see `bulkPush`). */
export async function push(client: RedisClient, names: KeyNames, p: PushCall): Promise<PushResult> {
  if (isBulk(p)) {
    const stored = await bulkPush(client, names, p);
    if (stored) return stored;
  }
  const { keys, args } = pushArgs(names, p);
  return pushReply(p, await runScript(client, 'push', keys, args));
}

/** From this many ids on, a push that may goes as a bulk push (see `bulkPush`). */
const BULK_IDS = 500;

/**
 * A push whose ids go by native commands (see `bulkPush`): many ids of the list store, to a
 * standalone Redis, which push.lua would only append (untracked, without data or trace), and that
 * Redis cannot refuse after they are written (no maxPending, no open ticket; not high, which
 * writes the key's other list).
 */
export function isBulk(p: PushCall): boolean {
  return (
    p.ids.length >= BULK_IDS &&
    p.store === 'list' &&
    p.job !== undefined &&
    !p.payloads &&
    !p.ticket &&
    !p.traceparent &&
    p.maxPending === undefined &&
    !p.high
  );
}

/**
 * A bulk push, in one MULTI: the key in its recovery index first, its ids by RPUSH (as a raw
 * pipeline sends them: a script that takes them as arguments costs Redis about twice the CPU,
 * each id made a Lua string and back), then push.lua for the rest, told how many it stored. A
 * transaction is all or nothing against other clients, and Redis refuses it whole when out of
 * memory (its reply, OOM, is what the push rejects with, not the EXECABORT that carries it). A
 * pending key of the wrong type fails the RPUSH and push.lua refuses (see its header): nothing of
 * the ids is written, and the index entry the MULTI wrote is taken back if the key was not listed
 * before. Only a function Redis lost (a restart, FUNCTION FLUSH), or another key of the wrong type,
 * leaves the ids stored and the rest undone: that push rejects with an error that is no reply of
 * Redis (its outcome is unknown to its caller), and the index brings the key to the workers'
 * recovery sweep. Undefined, having sent nothing, when the client does not run the scripts as
 * functions: the push goes as one call.
 */
async function bulkPush(client: RedisClient, names: KeyNames, p: PushCall): Promise<PushResult | undefined> {
  const index = p.job!.index;
  const listedAt = String(Date.now());
  const transaction = client.multi();
  // Whether the key was listed before: a refused push takes back only an entry of its own.
  transaction.zscore(index, p.key);
  transaction.zadd(index, listedAt, p.key);
  for (let i = 0; i < p.ids.length; i += 1000) transaction.rpush(names.pending, ...p.ids.slice(i, i + 1000));
  const { keys, args } = pushArgs(names, p, p.ids.length);
  if (!queueScript(client, transaction, 'push', keys, args)) {
    transaction.discard();
    return undefined;
  }
  // Null only for a transaction a WATCH aborted: this one watches nothing.
  const replies = (await transaction.exec().catch(redisOwnError))!;
  const [err, reply] = replies.at(-1)!;
  // The RPUSHes are all of one key: one fails (a key of the wrong type), all do, and push.lua refuses.
  const notStored = replies[2]?.[0];
  if (notStored) {
    const result = err ? undefined : pushReply(p, reply);
    // Taken back only while it is still the entry this push wrote (forget-key.lua).
    if (replies[0]?.[1] === null) await runScript(client, 'forget-key', [index], [p.key, listedAt]).catch(() => undefined);
    if (result?.refused) return result;
    throw notStored;
  }
  const result = err ? undefined : pushReply(p, reply);
  if (result && !result.refused) return result;
  const why = err
    ? lostFunction(client, err)
      ? 'Redis had lost its functions (they are loaded again)'
      : err.message
    : refusedText(result!.refused!);
  throw new Error(
    `the push's ids were stored, the rest of it was not (${why}); its key is in the recovery index`,
    err ? { cause: err } : {},
  );
}

/** A refusal's reason, for the message of a bulk push whose ids were stored before push.lua refused the rest. */
function refusedText(refused: PushRefusal): string {
  return refused.reason === 'wrong_type' ? `${refused.name} is a ${refused.found}, not a ${refused.wanted}` : refused.reason;
}

/**
 * A transaction Redis refused whole (EXECABORT) rejects with Redis's own reason, the error a
 * queued command got (OOM, say), which ioredis keeps in `previousErrors`; a ReplyError still, so
 * the push is known to have written nothing.
 */
function redisOwnError(err: unknown): never {
  const previous = (err as { previousErrors?: unknown }).previousErrors;
  if (Array.isArray(previous) && previous[0] instanceof Error) throw previous[0];
  throw err;
}

/** One push of a shared call (see pushMany): its key's names and what it stores. */
export interface PushOfMany {
  names: KeyNames;
  call: PushCall;
}

/**
 * Stores several pushes in one call (see push-many.lua), each whole, each with its own outcome:
 * its result, or the error reply Redis gave it (it then wrote nothing). The pushes all have a
 * `job` (standalone) or none (a Cluster, all of one slot). The call itself rejects as push does.
 */
export async function pushMany(client: RedisClient, pushes: readonly PushOfMany[]): Promise<Array<PushResult | Error>> {
  const built = pushes.map(({ names, call }) => pushArgs(names, call));
  const keys = built.flatMap((b) => b.keys);
  const args: ScriptArg[] = [pushes.length, built[0]!.keys.length, ...built.map((b) => b.args.length)];
  for (const b of built) for (const arg of b.args) args.push(arg);
  const replies = (await runScript(client, 'push-many', keys, args)) as unknown[];
  return replies.map((reply, i) => (reply instanceof Error ? reply : pushReply(pushes[i]!.call, reply)));
}

/** push.lua's KEYS and ARGV for one push (`stored`: how many of its ids it wrote before, and does not send). */
function pushArgs(names: KeyNames, p: PushCall, stored = 0): { keys: string[]; args: ScriptArg[] } {
  const job = p.job;
  // BullMQ's add keys are derived in the script from its prefix (job.ts pushAdd builds an add
  // only where they are what the installed BullMQ builds); its arguments open the tail, as built.
  const add = job && p.add;
  const addArgs = add ? add.call.args : [];
  const args = argv(
    'push',
    {
      store: p.store,
      delayMs: p.delayMs,
      ticket: p.ticket?.id ?? '',
      ticketTtlMs: p.ticket?.ttlMs ?? 0,
      key: p.key,
      indexScore: String(Date.now()),
      payloadMode: p.payloads?.mode ?? '',
      ticketMode: p.ticket?.open ? 'open' : 'new',
      callback: p.ticket?.callback ?? false,
      queuePrefix: job?.queuePrefix ?? '',
      addJob: add?.kind ?? '',
      addArgCount: addArgs.length,
      traceparent: p.traceparent ?? '',
      maxPending: p.maxPending ?? 0,
      ...fillArgs(p.fill),
      high: p.high ?? false,
      stored,
    },
    stored > 0 ? addArgs : [...addArgs, ...p.ids, ...(p.payloads?.json ?? [])],
  );
  return { keys: job ? [names.base, job.index] : [names.base], args };
}

/** What push.lua's reply to a push says. */
function pushReply(p: PushCall, reply: unknown): PushResult {
  const [covered, waitMs, added] = reply as [number, number, unknown];
  if (covered === REPLY.unknownTicket) return { refused: { reason: 'unknown_ticket' }, covered: false, waitMs: 0 };
  if (covered === REPLY.sealedTicket) return { refused: { reason: 'sealed_ticket' }, covered: false, waitMs: 0 };
  if (covered === REPLY.backlogFull) return { refused: backlogFull(p.maxPending ?? 0, waitMs, added), covered: false, waitMs: 0 };
  if (covered === REPLY.wrongType) {
    const [, name, found, wanted] = reply as [number, string, string, string];
    return { refused: { reason: 'wrong_type', name, found, wanted }, covered: false, waitMs: 0 };
  }
  return { covered: covered === 1, waitMs, ...(added !== undefined && added !== null && { added }) };
}

function backlogFull(limit: number, pending: unknown, adding: unknown): BacklogFull {
  return { reason: 'backlog_full', limit, pending: Number(pending), adding: Number(adding) };
}

/**
 * Whether a push of `ids` would take the key past `maxPending`, judged as push.lua judges it, with
 * nothing written (see backlog-check.lua): for a push that writes the key's index entry first.
 */
export async function checkBacklog(
  client: RedisClient,
  names: KeyNames,
  store: StoreKind,
  maxPending: number,
  ids: readonly Id[],
  high: boolean,
): Promise<BacklogFull | undefined> {
  const [status, pending, adding] = (await callScript(client, 'backlog-check', [names.base], { store, maxPending, high }, ids)) as number[];
  return status === REPLY.backlogFull ? backlogFull(maxPending, pending, adding) : undefined;
}

/** A wait to fill as the scripts take it (1 and 0: none; see includes/fill.lua). */
function fillArgs(fill: Fill | undefined): { fillMin: number; fillMaxWaitMs: number } {
  return fill ? { fillMin: fill.minSliceSize, fillMaxWaitMs: fill.maxWaitMs } : { fillMin: 1, fillMaxWaitMs: 0 };
}

/** Data per id as a claim returns it: id → its payloads (parsed JSON), oldest first. */
export type Payloads = Record<Id, unknown[]>;

/** A claim's data (`ClaimResult.payloadsJson`), parsed. */
export function parsePayloads(json: string): Payloads {
  return JSON.parse(json) as Payloads;
}

/** Trace context per id, as a claim returns it and a failed slice keeps it: id → the W3C traceparent of its push. */
export type Traces = Record<Id, string>;

/**
 * What a claim does with the ids of the previous slice first: ack them (done), restore them to
 * pending (a graceful stop), or, at a run's first claim, recover what a dead run left in flight
 * as a failed run of it.
 */
export type Settle = 'ack' | 'restore' | 'recover';

/** The key's lock as a claim needs it: its value (the fencing token) and its TTL. */
export interface LockRef {
  readonly value: string;
  readonly ttlMs: number;
}

/** A claim's arguments but the lock, which a `KeySession` binds (see key-session.ts). */
export type ClaimArgs = Omit<ClaimCall, 'lock'>;

export interface ClaimCall {
  lock: LockRef;
  /** Unique per call within a run; a resent claim with the same id changes nothing. */
  claimId: string;
  settle: Settle;
  /** Ids to claim; 0 settles only. */
  count: number;
  /** A run's first claim: take the lock if it is free. */
  takeLock?: boolean;
  /** Release the lock in the same call when nothing is claimed (the run ends). */
  releaseIfEmpty?: boolean;
  /** The key's rate limit, if it has one: the claim takes no more ids than its window has room for. */
  rate?: RateLimit;
  /** Hold the key this long (a handler's retryAfter) before claiming: nothing is claimed until it ends. */
  holdMs?: number;
  /** The run's lane (0, the default, for a single-lane run): the claim uses the lane's own names. */
  lane?: number;
  /** The key's wait to fill: pending ids that wait to fill are not claimed (waitMs says how long). */
  fill?: Fill | undefined;
  /**
   * With `releaseIfEmpty`: complete the run's BullMQ job in the same call when the run ends
   * (nothing claimed, nothing due later), and with `next`, make the first claim of the next key
   * job BullMQ's completion fetches, with `next.lock`. Standalone Redis only; see engine/claims/fused.ts.
   */
  finish?: {
    call: BullmqCall;
    /** BullMQ's keys are not sent: the claim derives them from BullMQ's arguments (see finish-job.lua). */
    derived?: boolean;
    next?: { lock: string; root: string };
  };
}

export type ClaimResult =
  | {
      held: true;
      ids: Id[];
      /**
       * When nothing was claimed: ms until something is due (a zset time, a failed slice's
       * backoff, a pause, a hold, the rate limit's window or a wait to fill); 0 when nothing is left; -1 while
       * the key is paused until resumed.
       */
      waitMs: number;
      /** Set when the ids are a failed slice run again. */
      retry?: RetrySlice;
      /** Ms the slice's oldest id waited before this claim (see `Store.pendingSince`), when known. */
      waitedMs?: number;
      /**
       * The data pushed with the claimed ids, by id, oldest first (ids pushed without data are
       * absent), as JSON (see `Payloads`). Text, so that each reader parses its own copy: what a
       * handler does to the data it reads never reaches its ids' dead letters.
       */
      payloadsJson?: string;
      /** Tickets the ack settled that want a callback (in the key's outbox): add their jobs. */
      settled?: string[];
      /**
       * BullMQ's moveToFinished reply, when the call completed the job (see `ClaimCall.finish`),
       * with the next key job's first claim as its fifth element when one was made.
       */
      finished?: unknown;
      /** The W3C traceparent of the push of each claimed pending id pushed in a trace (see includes/traces.lua). */
      traces?: Traces;
    }
  /** Another value holds the lock for `lockTtlMs` more (-1: it has no TTL; -2: nobody holds it). */
  | { held: false; lockTtlMs: number };

/** Settles the previous slice and claims up to `count` ids (or a due failed slice), in one call (see claim.lua). */
export async function claim(client: RedisClient, store: StoreKind, names: KeyNames, c: ClaimCall): Promise<ClaimResult> {
  return claimWith(client, store, names, c.lock, c);
}

/**
 * `claim` with the lock apart from the call's other arguments (a `KeySession` holds its own): a
 * claim (claim.lua), or, with `finish`, a claim that completes the run's job when it ends the run
 * (claim-and-finish.lua).
 */
export async function claimWith(client: RedisClient, store: StoreKind, names: KeyNames, lock: LockRef, c: ClaimArgs): Promise<ClaimResult> {
  const args = {
    store,
    lock: lock.value,
    claimId: c.claimId,
    settle: c.settle,
    count: c.count,
    lane: c.lane ?? 0,
    lockTtlMs: lock.ttlMs,
    takeLock: c.takeLock ?? false,
    releaseIfEmpty: c.releaseIfEmpty ?? false,
    rateMax: c.rate?.max ?? 0,
    rateWindowMs: c.rate ? enforcedWindowMs(c.rate) : 0,
    holdMs: c.holdMs ?? 0,
    ...fillArgs(c.fill),
  };
  const finish = c.finish;
  if (!finish) return claimResult(await callScript(client, 'claim', [names.base], args));
  const finishArgs = {
    ...args,
    finishKeys: finish.derived ? -1 : finish.call.keys.length,
    nextLock: finish.next?.lock ?? '',
    root: finish.next?.root ?? '',
  };
  const keys = finish.derived ? [names.base] : [names.base, ...finish.call.keys];
  return claimResult(await callScript(client, 'claim-and-finish', keys, finishArgs, finish.call.args));
}

/** A claim's reply (claim-key.lua's), as a ClaimResult. */
export function claimResult(raw: unknown): ClaimResult {
  const reply = raw as [number, number, string, number, string, string, unknown, string, ...Id[]];
  const [status, waitMs, retry, waitedMs, payloadsJson, settled, finished, traces] = reply;
  if (status !== REPLY.ok) {
    // A refusal's second element is the lock's TTL.
    const [, lockTtlMs] = reply;
    return { held: false, lockTtlMs };
  }
  const ids = reply.slice(CLAIM_REPLY_HEAD) as Id[];
  return {
    held: true,
    waitMs,
    ids,
    ...(retry && { retry: JSON.parse(retry) as RetrySlice }),
    ...(waitedMs >= 0 && { waitedMs }),
    ...(payloadsJson && { payloadsJson }),
    ...(settled && { settled: settled.split(' ') }),
    ...(finished !== '' && { finished }),
    ...(traces && { traces: JSON.parse(traces) as Traces }),
  };
}

/**
 * What a fetch that claims (see `fetch`) needs to make a fetched key's first claim as a run's
 * first claim would: the batcher's store, root and slice size, the lock's TTL, whether runs are
 * single-lane, and the rate limit and the wait to fill, which are the same for every key.
 */
export interface FirstClaimConfig {
  store: StoreKind;
  root: string;
  sliceSize: number;
  lockTtlMs: number;
  singleLane: boolean;
  rate: RateLimit | undefined;
  fill: Fill | undefined;
}

/**
 * BullMQ's moveToActive with the fetched key job's first claim in the same call (fetch-and-claim.lua),
 * its lock taken with `lock`: BullMQ's reply, whose fifth element is the claim's reply (see
 * `claimResult`) when it fetched a key job.
 */
export async function fetch(client: RedisClient, config: FirstClaimConfig, lock: string, bullmq: BullmqCall): Promise<unknown[]> {
  const reply = await callScript(
    client,
    'fetch-and-claim',
    bullmq.keys,
    {
      store: config.store,
      root: config.root,
      lock,
      count: config.sliceSize,
      lockTtlMs: config.lockTtlMs,
      releaseIfEmpty: config.singleLane,
      rateMax: config.rate?.max ?? 0,
      rateWindowMs: config.rate ? enforcedWindowMs(config.rate) : 0,
      ...fillArgs(config.fill),
    },
    bullmq.args,
  );
  return reply as unknown[];
}

/**
 * Settles a lane's last slice without claiming: acks it, or restores it to the front of pending;
 * with `holdMs` (a handler's retryAfter), holds the key at least that long (see flow.lua
 * `holdAfter`: a floor, doubled per ask in a row). Undefined when the lock is lost; else the
 * tickets the ack settled that want a callback, and how long the key is held (0: not).
 */
export async function settle(
  client: RedisClient,
  store: StoreKind,
  names: KeyNames,
  lock: LockRef,
  s: SettleCall,
): Promise<{ settled: string[]; heldMs: number } | undefined> {
  const { holdMs } = s;
  const result = await claimWith(client, store, names, lock, {
    claimId: s.claimId,
    settle: s.how,
    count: 0,
    lane: s.lane,
    ...(holdMs !== undefined && { holdMs }),
  });
  return result.held ? { settled: result.settled ?? [], heldMs: holdMs ? result.waitMs : 0 } : undefined;
}

/** How `settle` ends a lane's last slice. */
export interface SettleCall {
  lane: number;
  /** Unique per call within a run, as a claim's. */
  claimId: string;
  how: 'ack' | 'restore';
  /** A handler's retryAfter: hold the key at least this long. */
  holdMs?: number | undefined;
}

/**
 * How a release went: 'pending' when ids were left to claim (pushed while the lock was held, so
 * with no job add: the caller must requeue the key's job), 'lost' when the lock was no longer held.
 */
export type Released = 'released' | 'pending' | 'lost';

/**
 * Releases the key's lock at the end of a run that did not release it in its last claim: 'ack'
 * counts the slice in flight done, 'keep' leaves it for the next run to recover.
 */
export async function release(
  client: RedisClient,
  names: KeyNames,
  lock: string,
  mode: 'ack' | 'keep',
): Promise<{ released: Released; settled: string[] }> {
  const [status, settled] = (await runScript(client, 'release', [names.base], [lock, mode])) as [number, string];
  const released = status === REPLY.lockNotHeld ? 'lost' : status === REPLY.releasedWithPending ? 'pending' : 'released';
  return { released, settled: settled ? settled.split(' ') : [] };
}

/** What happens to a failed slice's ids (see failures.ts `planFailure`). */
export interface FailPlan {
  retry: { id: string; delayMs: number; slice: string }[];
  /** `messages[i]`, when given, is ids[i]'s own (ids failed by `ctx.fail`); else each records `message`. */
  dead: { ids: readonly Id[]; message: string; messages?: readonly string[] };
  /** The slice's ids in neither `retry` nor `dead` succeeded (`ctx.fail` reported the others): ack them in the same call. */
  ack?: true;
}

/**
 * Settles a failed slice of a lane, fenced and idempotent per `settleId` (see fail-slice.lua).
 * Undefined when the lock is lost; else the tickets its dead ids settled that want a callback.
 */
export async function failSlice(
  client: RedisClient,
  names: KeyNames,
  lane: number,
  lock: string,
  plan: FailPlan,
  maxTicketErrors: number,
  settleId: string,
): Promise<string[] | undefined> {
  const [status, settled] = (await callScript(client, 'fail-slice', [names.base], {
    lock,
    plan: JSON.stringify(plan),
    maxTicketErrors,
    settleId,
    lane,
  })) as [number, string];
  if (status === REPLY.lockNotHeld) return undefined;
  return settled ? settled.split(' ') : [];
}

/** How sealing went: settled now (its callback is in the outbox), sealed with ids pending, or refused. */
export type Sealed = 'settled' | 'pending' | 'unknown' | 'sealed_already';

/** Seals an open ticket (see seal-ticket.lua). */
export async function sealTicket(client: RedisClient, names: KeyNames, ticketId: string): Promise<Sealed> {
  const status = Number(await runScript(client, 'seal-ticket', [names.base], [ticketId]));
  return status === REPLY.ok
    ? 'settled'
    : status === REPLY.unknownTicket
      ? 'unknown'
      : status === REPLY.sealedTicket
        ? 'sealed_already'
        : 'pending';
}

/** Ms until the key has something to claim, as its claim would judge it (waiting `fill`, if given); -1 for nothing at all. */
export async function dueIn(client: RedisClient, store: StoreKind, names: KeyNames, fill?: Fill): Promise<number> {
  return Number(await callScript(client, 'due-in', [names.base], { store, ...fillArgs(fill) }));
}

/**
 * Pauses a key for `ms` (undefined: until resumed), listing it in the paused index in the same call
 * when `index` is given (standalone; see pause-key.lua). Returns the pause's end by the Redis
 * clock (ms), or undefined for a pause until resumed.
 */
export async function pauseKey(
  client: RedisClient,
  names: KeyNames,
  key: string,
  ms: number | undefined,
  index?: string,
): Promise<number | undefined> {
  const until = String(await runScript(client, 'pause-key', index ? [names.base, index] : [names.base], [key, ms ?? -1]));
  return until === '+inf' ? undefined : Number(until);
}

/** Ends a key's pause (and, with `index`, its listing, in the same call; see resume-key.lua): false when it was not paused. */
export async function resumeKey(client: RedisClient, names: KeyNames, key: string, index?: string): Promise<boolean> {
  return Number(await runScript(client, 'resume-key', index ? [names.base, index] : [names.base], [key])) === 1;
}
