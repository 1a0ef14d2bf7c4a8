import { aroundClose, blockingClientOf, type Worker } from '../bullmq';

/** The longest a closing worker waits for its blocking connection to finish reconnecting. */
export const RECONNECT_WAIT_MS = 10_000;

/**
 * Works around a window of BullMQ 6.7 with ioredis 5: `Worker.close()` disconnects the worker's
 * blocking connection and waits for ioredis' 'end' event, but ioredis never emits it when
 * `disconnect()` comes while it waits to reconnect (its stream is closed already and the reconnect
 * timer is cleared). So a close within about a second of Redis dropping the worker's connections
 * (a failover, `CLIENT KILL`) never resolved. The worker's `close` first waits, at most
 * `RECONNECT_WAIT_MS`, for that connection to be back. If Redis stays away longer, BullMQ's own
 * wait remains (README: Guarantees).
 */
export function closeAfterReconnect(worker: Worker): void {
  aroundClose(worker, async (close, force) => {
    await blockingReady(worker);
    const closing = close(force);
    const stuck = setTimeout(() => void unstickBlocking(worker), BLOCKING_DISCONNECT_WAIT_MS);
    try {
      return await closing;
    } finally {
      clearTimeout(stuck);
    }
  });
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

async function blockingReady(worker: Worker): Promise<void> {
  const client = await blockingClientOf(worker);
  if (!client || (client.status !== 'reconnecting' && client.status !== 'connecting')) return;
  let timer: NodeJS.Timeout | undefined;
  let onReady: (() => void) | undefined;
  await new Promise<void>((resolve) => {
    onReady = resolve;
    client.once('ready', onReady);
    timer = setTimeout(resolve, RECONNECT_WAIT_MS);
  });
  clearTimeout(timer);
  if (onReady) client.removeListener('ready', onReady);
}
