import { Cluster } from 'ioredis';
import { withDeadline } from '../core/deadline';
import { PushTimeoutError } from '../core/errors';
import { activeTraceparent } from '../core/trace-context';
import type { NormalizedPush } from '../core/input';
import { ensureJob, pushAdd, queuePrefixOf, WAIT_LIST, type KeyLevel, type KeyQueue, type Level } from '../storage/job';
import type { KeyNames, Keyspace } from '../storage/keys';
import { planPush, type StoreHow } from './plan';
import { checkBacklog, dueIn, type PushCall } from '../storage/protocol';
import type { Committer } from './committer';
import type { FillingKeys } from './filling';
import { jobAddFailed, outcomeOf } from './outcomes';
import { backlogFullError } from './backlog';
import { openTicket, sealTicket } from './tickets';
import type { TicketOutbox } from '../storage/ticket-outbox';
import type { RedisClient } from '../storage/scripts';
import type { Store } from '../storage/store';
import type { Fill, FillOption } from '../core/fill';
import type {
  BatchByKeyOptions,
  Key,
  Logger,
  MaxPendingPerKey,
  MergePolicy,
  PerformOptions,
  PerformResult,
  PushItem,
  Ticket,
} from '../core/types';

/** @internal */
export interface EnqueueDeps {
  client: RedisClient;
  /** The key's shard: its queue and its recovery index (see storage/shard-queues.ts). */
  shard: (key: Key) => { queue: KeyQueue; index: string };
  keyspace: Keyspace;
  store: Store;
  resolver: BatchByKeyOptions['key'];
  /** How long a ticket of a tracked push lives. */
  ticketTtlMs: number;
  /** Fair scheduling: a new key's job whose first push is more than a slice waits behind light ones (see scheduling.ts). */
  fair: boolean;
  /** The level of a key's new job (see storage/job.ts `keyLevels`): `priority(key)` ranks keys. */
  level: KeyLevel;
  logger: Logger;
  sliceSize: number;
  /** Wait to fill (`minSliceSize`, `maxWaitMs`; see core/fill.ts). */
  fill: FillOption | undefined;
  /** The longest a push waits for Redis. */
  timeoutMs: number;
  /** Resolves when this process's store is the batcher's (checked once, before the first write). */
  agree: () => Promise<void>;
  /** How a set or zset keeps the data of an id pushed again while pending. */
  merge: MergePolicy;
  /** `maxPendingPerKey`: a push that would take its key past it is refused whole (see backlog.ts). */
  maxPending: MaxPendingPerKey | undefined;
  /** Whether a tracked push asks for a callback when it settles, unless it says (the batcher has onTicketSettled). */
  callbacks: boolean;
  tickets: TicketOutbox;
  /** Sends the push's script call, shared with the pushes that arrive while one is in flight (group commit). */
  committer: Committer;
  /** Keys seen waiting to fill, whose pushes need no job add built (see filling.ts). */
  filling: FillingKeys;
}

/**
 * Validates everything (plan.ts), then stores the ids in one call (see push.lua), which also tells whether
 * a run that holds the key's lock, or the key's waiting job, will claim them. Unless one will,
 * the key's job is added (by that same call on a standalone Redis, after it on a Cluster or for a
 * job that must wait), deduplicated by key with `keepLastIfActive`: if the
 * key's job is finishing right now, BullMQ keeps this add and starts it when that job ends, so no
 * push is left without a job (no lost wakeup). An active job whose run does not hold the lock is
 * never trusted: it may be between its last (empty) claim and its completion, and the add, which
 * BullMQ keeps as the next job, is what covers that window. Waits at most `timeoutMs` for Redis.
 * Once the script call may have gone out, a failure that is not Redis's own answer rejects with a
 * PushOutcomeUnknownError (see outcomes.ts): only then may a rejected push have stored its ids.
 */
export async function performBatchLater(
  deps: EnqueueDeps,
  items: ReadonlyArray<PushItem>,
  options: PerformOptions = {},
): Promise<PerformResult> {
  const startedAt = Date.now();
  watchErrors(deps.client);
  const plan = await planPush(deps, items, options);
  const { key } = plan;
  // Set once the push's script call is handed to the committer: from then on a deadline cannot
  // tell what Redis did with it, and says so.
  const progress = { sent: false };
  // From the call on: a push that waits for a shared call (see committer.ts) waits within it.
  const within = <T>(work: Promise<T>) =>
    withDeadline(work, Math.max(0, deps.timeoutMs - (Date.now() - startedAt)), () =>
      pushTimedOut(key, deps.timeoutMs, progress.sent, deps.client),
    );
  if (plan.emptyTicket) {
    // Nothing to wait for: a ticket that is settled at once (and so calls back, if asked).
    const ticket = await within(emptyTicket(deps, key, plan.emptyTicket.callback));
    return { key, pushed: 0, ticket };
  }
  if (plan.store) await within(store(deps, key, plan.store.names, plan.store.push, plan.store.how, progress));
  return plan.result;
}

async function emptyTicket(deps: EnqueueDeps, key: Key, callback: boolean): Promise<Ticket> {
  const ticket = await openTicket(deps.tickets, key, callback);
  await sealTicket(deps.tickets, ticket);
  return ticket;
}

/** Everything a push sends to Redis, once its input is valid. */
async function store(
  deps: EnqueueDeps,
  key: Key,
  names: KeyNames,
  { ids, payloads }: NormalizedPush,
  { delayMs, ticket, maxPending, fill, high }: StoreHow,
  progress: { sent: boolean },
): Promise<void> {
  const { client } = deps;
  const traceparent = activeTraceparent();
  await deps.agree();
  const kind = deps.store.kind;
  // On a Cluster the index and BullMQ's keys sit in other slots than the key's data: the index is
  // written first (so stored ids are always findable by recovery) and the job is always added.
  // So it is with a BullMQ that names its keys otherwise than push.lua derives them.
  const { queue, index } = deps.shard(key);
  const queuePrefix = client instanceof Cluster ? undefined : queuePrefixOf(queue);
  const cluster = queuePrefix === undefined;
  if (cluster) {
    // A push refused for its key's backlog writes no index entry either: judged first, with
    // nothing written; push.lua judges again with its write.
    const full = maxPending === undefined ? undefined : await checkBacklog(client, names, kind, maxPending, ids, high);
    if (full) throw backlogFullError(key, full);
    await client.zadd(index, Date.now(), key);
  }
  const call: PushCall = {
    store: kind,
    key,
    ids,
    ...(payloads && { payloads: { mode: kind === 'list' ? 'list' : deps.merge, json: payloads } }),
    delayMs,
    ...(ticket && { ticket }),
    ...(queuePrefix !== undefined && { job: { index, queuePrefix } }),
    ...(traceparent && { traceparent }),
    ...(maxPending !== undefined && { maxPending }),
    ...(fill && { fill }),
    ...(high && { high }),
  };
  // A light newcomer queues FIFO before keys whose first push is bigger than a slice, and a
  // high-priority key's job before both.
  const level = deps.level(key, deps.fair && ids.length > deps.sliceSize ? 'heavy' : 'light');
  // The push carries BullMQ's add of the key's job, for push.lua to make in the same call if the
  // key needs one, unless this is a Cluster or a zset key (whose job may wait for its earliest id).
  const startsNow = !fill || high || ids.length >= fill.minSliceSize;
  const filling = cluster || kind === 'zset' || !fill ? undefined : deps.filling;
  const add = cluster || kind === 'zset' ? undefined : carriedAdd(queue, key, level, startsNow ? undefined : fill, filling);
  // Up to here nothing of the ids was written. From the script call on, only Redis's own answer
  // to the one time the call was sent says what happened (see outcomes.ts).
  const committing = deps.committer.commit({ names, call: { ...call, ...(add && { add }) } });
  progress.sent = true;
  const pushed = outcomeOf(key, await committing);
  // The ids are stored; the key is in its recovery index, so a workers' sweep serves it if the job add fails.
  try {
    await add?.done(pushed.added ?? null);
    if (!pushed.covered && pushed.added === undefined) {
      const waitMs = Math.max(0, pushed.waitMs);
      await ensureJob(client, queue, key, waitMs, level);
      // Not for a list's or set's wait to fill, to spare a call: its job's time is its oldest
      // id's, whichever push sets it, and a push that fills the key adds or brings the job
      // forward itself. Only when that lands between this push's call and this add to a job that
      // was active or delayed past this push's time can this add move it back, to this push's
      // time: the key then starts at most maxWaitMs late.
      if (kind === 'zset') await bringForward(deps.client, queue, key, level, names, waitMs, fill);
    }
  } catch (err) {
    throw jobAddFailed(key, err);
  }
  filling?.saw(key, pushed.waitMs);
}

/**
 * BullMQ's add of the key's job a push carries (BullMQ's own script, with the arguments BullMQ
 * built; see job.ts pushAdd): its standard add where the job may start now (the wait list's
 * level), its delayed add of `waitsToFill.maxWaitMs` for a list's or set's key that waits to fill
 * (its push starts no run by itself, nor is high, whose ids never wait), which push.lua makes for
 * the push that starts the wait. Building it costs the pusher CPU, so a push to a key it saw
 * waiting with its job builds none (see filling.ts).
 */
function carriedAdd(queue: KeyQueue, key: Key, level: Level, waitsToFill: Fill | undefined, filling: FillingKeys | undefined) {
  if (!waitsToFill) return level === WAIT_LIST ? pushAdd(queue, key, 0, level) : undefined;
  return filling?.covers(key) ? undefined : pushAdd(queue, key, waitsToFill.maxWaitMs, level);
}

/**
 * ioredis keeps commands queued while it reconnects, and BullMQ's add waits for its connection
 * without end: without a deadline a controller's request would hang as long as Redis is away.
 * The push's work goes on after the deadline (its call, if queued, goes out once Redis is back), so
 * its outcome is unknown either way; `sent` says whether its script call had gone out already.
 * While the connection is down, the error that took it down is the cause.
 */
function pushTimedOut(key: Key, timeoutMs: number, sent: boolean, client: RedisClient): PushTimeoutError {
  const what = sent
    ? 'its script call was sent and got no answer'
    : 'it got no answer from Redis before its script call could be sent (that call may still go out once Redis answers)';
  const down = client.status === 'ready' ? undefined : lastErrors.get(client);
  return new PushTimeoutError(
    `performBatchLater for key ${JSON.stringify(key)} cannot tell whether Redis stored its ids: ${what} within pushTimeoutMs ` +
      `(${timeoutMs} ms)${down ? ` (the connection is ${client.status}: ${down.message})` : ''}. They may still land, and then they run; ` +
      `a retry is at least once`,
    down ? { cause: down } : {},
  );
}

/** The last error each client emitted, for a timed-out push to give as its cause. */
const lastErrors = new WeakMap<RedisClient, Error>();

/**
 * Records a client's connection errors, once per client. Only beside a listener there is already
 * (ours logs them; see core/connection.ts): a listener of our own on a user's client that has none
 * would silence ioredis' report of its unhandled errors.
 */
function watchErrors(client: RedisClient): void {
  if (watched.has(client) || client.listenerCount('error') === 0) return;
  watched.add(client);
  const record = (err: unknown) => {
    if (err instanceof Error) lastErrors.set(client, err);
  };
  client.on('error', record);
  if (client instanceof Cluster) client.on('node error', record);
}
const watched = new WeakSet<RedisClient>();

/** A zset key's job is correct to within this much; closer readings are clock noise. */
const RESCHEDULE_TOLERANCE_MS = 20;

/**
 * Concurrent zset pushes reschedule the key's delayed job last-writer-wins, so a push that read
 * the key before another's earlier id landed (or before another filled it) can move the job too
 * late. Each pusher reads the key again after its own add and brings the job forward if an id is
 * now due sooner.
 */
async function bringForward(
  client: RedisClient,
  queue: KeyQueue,
  key: Key,
  level: Level,
  names: KeyNames,
  waitMs: number,
  fill: Fill | undefined,
): Promise<void> {
  let dueAt = Date.now() + waitMs;
  for (let attempt = 0; attempt < 2; attempt++) {
    const readyIn = await dueIn(client, 'zset', names, fill);
    if (readyIn < 0 || Date.now() + readyIn >= dueAt - RESCHEDULE_TOLERANCE_MS) return;
    dueAt = Date.now() + readyIn;
    await ensureJob(client, queue, key, readyIn, level);
  }
}
