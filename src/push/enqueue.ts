import { Cluster } from 'ioredis';
import { withDeadline } from '../core/deadline';
import { PushTimeoutError } from '../core/errors';
import { activeTraceparent } from '../core/trace-context';
import type { NormalizedPush } from '../core/input';
import { queuePrefixOf, type KeyJobs } from '../storage/key-job';
import type { KeyQueue } from '../storage/job';
import type { KeyNames } from '../storage/keys';
import { planPush, type PlanDeps, type StoreHow } from './plan';
import { checkBacklog, type PushCall, type PushResult } from '../storage/protocol';
import type { Committer } from '../storage/committer';
import { jobAddFailed, outcomeOf } from './outcomes';
import { backlogFullError } from './backlog';
import { settledTicket } from './tickets';
import type { OpenPushSpan, PushSpan } from './push-span';
import type { TicketOutbox } from '../storage/ticket-outbox';
import type { RedisClient } from '../storage/scripts';
import type { Key, MergePolicy, PerformOptions, PerformResult, PushItem, StoreKind } from '../core/types';

/**
 * What a push needs, by the step that needs it: its plan (its input and its key's options), its
 * store (the call, and the key's job), and for the push as a whole its deadline and the ticket of
 * a tracked push of no ids.
 * @internal
 */
export interface EnqueueDeps {
  plan: PlanDeps;
  store: StoreDeps;
  /** Settles the ticket of a tracked push of no ids at once. */
  tickets: TicketOutbox;
  /** The connection: a timed-out push names the error that took it down. */
  client: RedisClient;
  /** The longest a push waits for Redis. */
  timeoutMs: number;
  /** `tracePushes`: opens each push's producer span (ops/tracing.ts); undefined when off. */
  spans?: OpenPushSpan;
}

/** What storing a push needs (see `store`). */
export interface StoreDeps {
  client: RedisClient;
  /** The key's shard: its queue and its recovery index (see storage/shard-queues.ts). */
  shard: (key: Key) => { queue: KeyQueue; index: string };
  store: StoreKind;
  /** How a set or zset keeps the data of an id pushed again while pending. */
  merge: MergePolicy;
  /** Resolves when this process's store is the batcher's (checked once, before the first write). */
  agree: () => Promise<void>;
  /** Sends the push's script call, shared with the pushes that arrive while one is in flight (group commit). */
  committer: Committer;
  /** The owner of the key's job (storage/key-job.ts). */
  keyJobs: KeyJobs;
}

/**
 * Validates everything (plan.ts), then stores the ids in one call (see push.lua), which also tells
 * whether a run that holds the key's lock, or the key's waiting job, will claim them. Unless one
 * will, the key's job is added: by that same call on a standalone Redis, after it on a Cluster or
 * for a job that must wait (storage/key-job.ts says why that leaves no push without a job). Waits
 * at most `timeoutMs` for Redis. Once the script call may have gone out, a failure that is not
 * Redis's own answer rejects with a PushOutcomeUnknownError (see outcomes.ts): only then may a
 * rejected push have stored its ids.
 *
 * With `tracePushes`, the push runs in a producer span whose context its ids carry. Off, the push
 * is the same function called directly: no span, no closure, no await more.
 */
export function performBatchLater(deps: EnqueueDeps, items: ReadonlyArray<PushItem>, options: PerformOptions = {}): Promise<PerformResult> {
  return deps.spans ? traced(deps, deps.spans(), items, options) : enqueue(deps, items, options, undefined);
}

async function traced(deps: EnqueueDeps, span: PushSpan, items: ReadonlyArray<PushItem>, options: PerformOptions): Promise<PerformResult> {
  try {
    const result = await enqueue(deps, items, options, span);
    span.end();
    return result;
  } catch (error) {
    span.fail(error);
    throw error;
  }
}

async function enqueue(
  deps: EnqueueDeps,
  items: ReadonlyArray<PushItem>,
  options: PerformOptions,
  span: PushSpan | undefined,
): Promise<PerformResult> {
  const startedAt = Date.now();
  watchErrors(deps.client);
  const plan = await planPush(deps.plan, items, options);
  const { key } = plan;
  span?.planned(key, plan.result.pushed, deps.store.store);
  // Set once the push's script call is handed to the committer: from then on a deadline cannot
  // tell what Redis did with it, and says so.
  const progress = { sent: false };
  // From the call on: a push that waits for a shared call (see committer.ts) waits within it.
  const within = <T>(work: Promise<T>) =>
    withDeadline(work, Math.max(0, deps.timeoutMs - (Date.now() - startedAt)), () =>
      pushTimedOut(key, deps.timeoutMs, progress.sent, deps.client),
    );
  if (!plan.emptyTicket) {
    if (plan.store) {
      // The producer span's context when there is one, else the caller's active span's (see trace-context.ts).
      const traceparent = span ? span.traceparent() : activeTraceparent();
      const pushed = await within(store(deps.store, key, plan.store.names, plan.store.push, plan.store.how, traceparent, progress));
      span?.stored(pushed.covered);
    }
    return plan.result;
  }
  // Nothing to wait for: a ticket that is settled at once (and so calls back, if asked).
  const ticket = await within(settledTicket(deps.tickets, key, plan.emptyTicket.callback));
  return { key, pushed: 0, ticket };
}

/** Everything a push sends to Redis, once its input is valid. */
async function store(
  deps: StoreDeps,
  key: Key,
  names: KeyNames,
  { ids, payloads }: NormalizedPush,
  { delayMs, ticket, maxPending, fill, high, level }: StoreHow,
  traceparent: string | undefined,
  progress: { sent: boolean },
): Promise<PushResult> {
  const { client, store: kind } = deps;
  await deps.agree();
  // On a Cluster the index and BullMQ's keys sit in other slots than the key's data: the index is
  // written first (so stored ids are always findable by recovery) and the job is always added.
  // So it is with a BullMQ that names its keys otherwise than push.lua derives them.
  const { queue, index } = deps.shard(key);
  const queuePrefix = client instanceof Cluster ? undefined : queuePrefixOf(queue);
  const cluster = queuePrefix === undefined;
  // The push carries BullMQ's add of the key's job, for push.lua to make in the same call if the
  // key needs one, unless this is a Cluster or a zset key (whose job may wait for its earliest id).
  // A list's or set's key that waits to fill (its push starts no run by itself, nor is high, whose
  // ids never wait) carries its delayed add of maxWaitMs, for the push that starts the wait.
  // Building it costs the pusher CPU, so a push to a key it saw waiting with its job builds none
  // (see storage/key-job.ts `carried`).
  const waitsToFill = fill && !high && ids.length < fill.minSliceSize ? fill : undefined;
  const add = cluster || kind === 'zset' ? undefined : deps.keyJobs.carried(queue, key, level, waitsToFill?.maxWaitMs);
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
  // Up to here nothing of the ids was written. From the script call on, only Redis's own answer
  // to the one time the call was sent says what happened (see outcomes.ts).
  const committing = deps.committer.commit({ names, call: { ...call, ...(add && { add }) } });
  progress.sent = true;
  const pushed = outcomeOf(key, await committing);
  // The ids are stored; the key is in its recovery index, so a workers' sweep serves it if the job add fails.
  const pushedKey = kind === 'zset' ? { key, queue, level, zset: { names, fill } } : { key, queue, level, mayFill: !cluster && !!fill };
  await deps.keyJobs.afterPush(pushedKey, add, pushed).catch((err: unknown) => {
    throw jobAddFailed(key, err);
  });
  return pushed;
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
