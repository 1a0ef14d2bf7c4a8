import { randomUUID } from 'node:crypto';
import { DelayedError, type Job } from '../bullmq';
import { CallbackTimeoutError, InvalidOptionError, ShutdownError, TicketSealedError, UnknownTicketError } from '../core/errors';
import { withDeadline } from '../core/deadline';
import { Stop, type CancelSource } from '../core/stop';
import { JOB_NAME, type KeyQueue } from '../storage/job';
import { encodeKey, ticketHash, type KeyNames, type Keyspace } from '../storage/keys';
import { log } from '../core/logger';
import { progress, parseTicket } from './progress';
import { sealTicket as sealScript } from '../storage/protocol';
import type { RedisClient } from '../storage/scripts';
import type { Key, Logger, Ticket, TicketOutcome } from '../core/types';

/**
 * Completion callbacks and open tickets. A ticket settles when its every id is done or dead
 * (and, for an open ticket, once it is sealed): the Lua call that counts its last id records
 * that once and puts the ticket in its key's outbox, in the same step (see includes/tracking.lua).
 * A worker then adds the callback as a BullMQ job whose id is the ticket's, and only then takes
 * the ticket out of the outbox; a crash in between leaves it there for the recovery sweep. The
 * job id makes a second add (after such a crash) a no-op, so the callback job exists once, and
 * runs at least once (BullMQ retries it): it gets the ticket, to be idempotent.
 */

/** The BullMQ job name of a ticket's callback. */
export const TICKET_JOB_NAME = `${JOB_NAME}:ticket`;

/** @internal */
export interface TicketDeps {
  client: RedisClient;
  keyspace: Keyspace;
  /** The queue of the key's shard (a callback job runs on its key's shard). */
  queue: (key: Key) => KeyQueue;
  ticketTtlMs: number;
  /** Retries of a failing callback (BullMQ attempts), with an exponential backoff from 1 s. */
  attempts: number;
}

/** A ticket's id within its key: the part after the encoded key. */
const ticketOf = (key: Key, id: string): Ticket => `${encodeKey(key)}.${id}`;

/** Adds the callback jobs of settled tickets, then takes them out of the key's outbox. */
export async function addCallbacks(deps: TicketDeps, key: Key, ticketIds: readonly string[]): Promise<void> {
  const names = deps.keyspace.forKey(key);
  for (const id of ticketIds) {
    await deps.queue(key).add(
      TICKET_JOB_NAME,
      { key, ticket: ticketOf(key, id) },
      {
        // BullMQ ignores an add whose job id exists, and keeps a completed one as long as the
        // ticket's status lives: a second add after a crash finds it.
        jobId: `bbk-ticket-${id}`,
        attempts: deps.attempts,
        backoff: { type: 'exponential', delay: 1_000 },
        removeOnComplete: { age: Math.ceil(deps.ticketTtlMs / 1000) },
        removeOnFail: { count: 1000 },
      },
    );
    await deps.client.lrem(names.settledTickets, 1, id);
  }
}

/** The recovery sweep's part: adds what a crashed worker left in a key's outbox. */
export async function drainOutbox(deps: TicketDeps, key: Key, names: KeyNames): Promise<number> {
  const left = await deps.client.lrange(names.settledTickets, 0, -1);
  if (left.length > 0) await addCallbacks(deps, key, [...new Set(left)]);
  return left.length;
}

/** Creates an open ticket of `key`: pushes add to it (`{ ticket }`) until `sealTicket`. */
export async function openTicket(deps: TicketDeps, key: Key, callback: boolean): Promise<Ticket> {
  const id = randomUUID();
  const hash = ticketHash(deps.keyspace.forKey(key), id);
  await deps.client
    .multi()
    .hset(hash, { total: 0, done: 0, failed: 0, sealed: '0', ttl: deps.ticketTtlMs, cb: callback ? '1' : '0' })
    .pexpire(hash, deps.ticketTtlMs)
    .exec();
  return ticketOf(key, id);
}

/** Seals an open ticket; if it settles at once, adds its callback. */
export async function sealTicket(deps: TicketDeps, ticket: Ticket): Promise<void> {
  const { key, id } = parseTicket(ticket);
  const sealed = await sealScript(deps.client, deps.keyspace.forKey(key), id);
  if (sealed === 'unknown')
    throw new UnknownTicketError(`ticket ${ticket} is unknown or expired (open tickets live ticketTtlMs after their last push)`);
  if (sealed === 'sealed_already') throw new TicketSealedError(`ticket ${ticket} is sealed already`);
  if (sealed === 'settled') await addCallbacks(deps, key, [id]);
}

/**
 * Runs a ticket's callback job, bounded as a slice is: the callback gets a signal that aborts
 * with a CallbackTimeoutError after `timeoutMs` (then the job fails that attempt, and BullMQ
 * retries it) or with a ShutdownError when the worker closes (then the job goes back to wait,
 * no attempt spent, and `worker.close()` does not wait for a callback that never settles).
 * Without a callback in this worker it fails (BullMQ retries it, perhaps on a worker that has one).
 */
export async function runTicketCallback(
  deps: TicketDeps,
  job: Job<{ key: Key; ticket?: Ticket }>,
  token: string,
  cancel: CancelSource | undefined,
  callback: ((outcome: TicketOutcome, ticket: Ticket, signal: AbortSignal) => unknown) | undefined,
  options: { timeoutMs: number; logger: Logger },
): Promise<void> {
  const ticket = job.data.ticket;
  if (ticket === undefined) throw new InvalidOptionError('a ticket callback job without a ticket');
  if (!callback) {
    throw new InvalidOptionError(`ticket ${ticket} settled and asked for a callback, but this worker's batcher has no onTicketSettled`);
  }
  const p = await progress(deps.client, deps.keyspace, ticket);
  log(options.logger, 'debug', 'batch-by-key: ticket settled, running its callback', { ticket });
  // The callback's signal follows BullMQ's (a shutdown) as a run's does, and its timeout.
  const stop = new Stop(cancel);
  const signal = stop.signal;
  const closing = new Promise<'closing'>((resolve) => {
    const onAbort = () => signal.reason instanceof ShutdownError && resolve('closing');
    if (signal.aborted) onAbort();
    else signal.addEventListener('abort', onAbort, { once: true });
  });
  const call = Promise.resolve().then(() => callback({ ...p, ticket, success: p.failed === 0 }, ticket, signal));
  const ended = await withDeadline(Promise.race([call.then(() => 'done' as const), closing]), options.timeoutMs, () => {
    const error = new CallbackTimeoutError(`onTicketSettled for ticket ${ticket} ran longer than sliceTimeoutMs (${options.timeoutMs} ms)`);
    stop.abort(error);
    return error;
  });
  if (ended === 'closing') {
    // The callback is abandoned, not failed: it runs again, whole, on a worker that stays.
    call.catch(() => undefined);
    await job.moveToDelayed(Date.now(), token);
    throw new DelayedError();
  }
}
