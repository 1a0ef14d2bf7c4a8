import { aroundClose, blockingClientOf, ownClientsOf, type Worker } from '../bullmq';
import { Cluster, Redis, ReplyError } from 'ioredis';
import { endClient } from '../core/connection';

/**
 * How long a closing worker waits for Redis beyond `shutdownTimeoutMs` (the longest a slice of
 * its runs goes on after the signal) before it drops its connections and returns.
 */
export const CLOSE_REDIS_WAIT_MS = 10_000;

/**
 * Bounds a worker's `close()` (BullMQ 6.7 with ioredis 5), whether Redis is there or not:
 *
 * - BullMQ's close disconnects the worker's blocking connection and waits for ioredis' 'end'
 *   event, which ioredis never emits when `disconnect()` comes while it waits to reconnect (its
 *   stream is closed already; only its retry timer is cleared, so it never reconnects either). A
 *   close begun while Redis was away (a failover, `CLIENT KILL`, an outage) waited for ever, even
 *   once Redis was back. Such a connection is ended here first (see `endClient`): BullMQ's close
 *   then goes on as soon as Redis answers the rest. (A Cluster's is waited for instead, at most
 *   CLUSTER_RECONNECT_WAIT_MS.)
 * - A close still waiting `shutdownTimeoutMs + CLOSE_REDIS_WAIT_MS` after it began waits on a
 *   Redis that is away (or does not answer): the worker's own connections are ended, which fails
 *   what they still queued, and `close()` returns. Its keys come back as after a crash (their
 *   locks expire within `lockTtlMs`).
 * - A close still waiting `shutdownTimeoutMs + CLOSE_REFUSED_WAIT_MS` after it began, while Redis
 *   answers (a PING gets a reply, an error reply too), waits on a Redis that refuses what the runs
 *   write (out of memory, a busy script): they retry until it takes them, which waiting longer
 *   for a Redis that is there does not hasten. It ends the same way then, without the wait meant
 *   for a Redis that is away.
 *
 * Every call of the worker's `close` gets the first one's promise.
 */
export function closeBounded(worker: Worker, shutdownTimeoutMs: number): void {
  let closing: Promise<void> | undefined;
  aroundClose(worker, (close, force) => (closing ??= bounded(worker, () => close(force), shutdownTimeoutMs)));
}

async function bounded(worker: Worker, close: () => Promise<void>, shutdownTimeoutMs: number): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  let asking: NodeJS.Timeout | undefined;
  let ended = false;
  const late = new Promise<'late'>((resolve) => {
    timer = setTimeout(() => resolve('late'), shutdownTimeoutMs + CLOSE_REDIS_WAIT_MS);
    // Asked again each interval: a Redis silent a moment may answer (and refuse) later.
    const askIn = (ms: number) => {
      asking = setTimeout(() => {
        void answers(worker).then((yes) => {
          // An answer that comes after the close ended asks nothing more.
          if (yes) resolve('late');
          else if (!ended) askIn(CLOSE_ASK_INTERVAL_MS);
        });
      }, ms);
    };
    askIn(shutdownTimeoutMs + CLOSE_REFUSED_WAIT_MS);
  });
  const blocking: Redis | Cluster | undefined = await blockingClientOf(worker);
  if (blocking?.status === 'reconnecting') {
    // A Cluster client reaches 'end' only through its nodes, which it has none of now: it gets
    // CLUSTER_RECONNECT_WAIT_MS to come back (a failover takes seconds), and the bound after.
    if (blocking instanceof Cluster) await readyWithin(blocking, CLUSTER_RECONNECT_WAIT_MS);
    else endClient(blocking);
  }
  const closing = close();
  const stuck = setTimeout(() => void unstickBlocking(worker), BLOCKING_DISCONNECT_WAIT_MS);
  try {
    if ((await Promise.race([closing, late])) !== 'late') return;
    // BullMQ's close goes on: it ends once the connections below fail what they queued.
    closing.catch(() => undefined);
    for (const client of await ownClientsOf(worker)) endClient(client);
  } finally {
    clearTimeout(stuck);
    clearTimeout(timer);
    ended = true;
    clearTimeout(asking);
  }
}

/**
 * How long past `shutdownTimeoutMs` a close waits before it asks whether Redis answers: the slices
 * it stopped are handed back by then, and their releases, retried with a backoff of at most 1 s
 * while Redis refuses them, have had two tries.
 */
export const CLOSE_REFUSED_WAIT_MS = 2_000;
/** How often a close asks again, and how long it waits for each answer. */
const CLOSE_ASK_INTERVAL_MS = 1_000;

/**
 * Whether Redis answers the worker's command connection (the caller's client when the worker was
 * given one) within CLOSE_ASK_INTERVAL_MS: a reply, or an error reply (OOM refuses no PING, BUSY
 * does). A PING that is not answered (Redis away, stopped) is left to fail as the connection ends.
 */
async function answers(worker: Worker): Promise<boolean> {
  const blocking = await blockingClientOf(worker);
  const given = worker.opts.connection;
  const client =
    (await ownClientsOf(worker)).find((c) => c !== blocking) ?? (given instanceof Redis || given instanceof Cluster ? given : undefined);
  if (!client) return false;
  let timer: NodeJS.Timeout | undefined;
  const answered = await Promise.race([
    client.ping().then(
      () => true,
      (err: unknown) => err instanceof ReplyError,
    ),
    new Promise<false>((resolve) => (timer = setTimeout(() => resolve(false), CLOSE_ASK_INTERVAL_MS))),
  ]);
  clearTimeout(timer);
  return answered;
}

/** The longest a closing worker waits for its blocking Cluster connection to finish reconnecting. */
export const CLUSTER_RECONNECT_WAIT_MS = 10_000;

async function readyWithin(client: Cluster, ms: number): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  let onReady: (() => void) | undefined;
  await new Promise<void>((resolve) => {
    onReady = resolve;
    client.once('ready', onReady);
    timer = setTimeout(resolve, ms);
  });
  clearTimeout(timer);
  if (onReady) client.removeListener('ready', onReady);
}

/** How long a closing worker's blocking connection may stay connected before it is disconnected here. */
export const BLOCKING_DISCONNECT_WAIT_MS = 2_000;

/**
 * A second window, on a Redis Cluster: a worker closed within moments of its creation waited for
 * ever. BullMQ's close first disconnects the blocking connection, but awaits that connection's
 * setup (its version check) before it does, and on a Cluster that setup could stay unfinished
 * while the client itself was ready (reproduced: about one in ten closes right after
 * `createWorker`). Every close disconnects that client at once, so one still connected
 * `BLOCKING_DISCONNECT_WAIT_MS` after the close began is stuck there: it is disconnected here,
 * which ends the setup's wait, and BullMQ's close goes on (its later steps run despite that
 * step's error).
 */
async function unstickBlocking(worker: Worker): Promise<void> {
  const client = await blockingClientOf(worker);
  if (client && (client.status === 'ready' || client.status === 'connect')) client.disconnect();
}
