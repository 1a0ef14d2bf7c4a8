import { randomUUID } from 'node:crypto';
import { ClosedError, describe, InvalidOptionError, UnknownTicketError, WaitTimeoutError } from '../core/errors';
import { withDeadline } from '../core/deadline';
import { onlyKnownOptions, optionNames, positiveMs } from '../core/validate';
import { encodeKey, ticketChannel, ticketErrors, ticketHash, type Keyspace } from '../storage/keys';
import type { TicketChannel } from './ticket-channel';
import type { RedisClient } from '../storage/scripts';
import type { Id, Key, Progress, Ticket, WaitForOptions } from '../core/types';

/** Errors kept per ticket; `failed` still counts every dead id. */
export const MAX_TICKET_ERRORS = 100;

/** A new ticket for a push to `key`: it names the key, so progress() finds the key's hash slot. */
export function newTicket(key: Key): { ticket: Ticket; id: string } {
  const id = randomUUID();
  return { ticket: `${encodeKey(key)}.${id}`, id };
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

export function parseTicket(ticket: unknown): { key: Key; id: string } {
  const dot = typeof ticket === 'string' ? ticket.lastIndexOf('.') : -1;
  const id = dot > 0 ? (ticket as string).slice(dot + 1) : '';
  if (UUID.test(id)) {
    try {
      return { key: decodeURIComponent((ticket as string).slice(0, dot)), id };
    } catch {
      // Falls through to the error below.
    }
  }
  throw new InvalidOptionError(
    `ticket must be a ticket returned by performBatchLater(ids, { track: true }) or openTicket(key), got ${describe(ticket)}`,
  );
}

export async function progress(client: RedisClient, keyspace: Keyspace, ticket: Ticket): Promise<Progress> {
  const { key, id } = parseTicket(ticket);
  const names = keyspace.forKey(key);
  const [counts, errors] = await Promise.all([client.hgetall(ticketHash(names, id)), client.lrange(ticketErrors(names, id), 0, -1)]);
  if (counts.total === undefined) {
    throw new UnknownTicketError(`ticket ${ticket} is unknown or expired (tickets live ticketTtlMs after their push)`);
  }
  const total = Number(counts.total);
  const done = Number(counts.done ?? 0);
  const failed = Number(counts.failed ?? 0);
  const dropped = Number(counts.dropped ?? 0);
  return {
    total,
    done,
    failed,
    dropped,
    pending: total - done - failed - dropped,
    errors: errors.map((json) => JSON.parse(json) as { id: Id; message: string }),
    sealed: counts.sealed !== '0',
  };
}

/** Every name `WaitForOptions` has (the compiler holds the list to the type). */
const WAIT_FOR_OPTIONS = optionNames<WaitForOptions>()(['timeoutMs', 'pollMs', 'onProgress']);

const sameCounts = (a: Progress | undefined, b: Progress): boolean =>
  a !== undefined && a.total === b.total && a.done === b.done && a.failed === b.failed && a.dropped === b.dropped && a.sealed === b.sealed;

/**
 * Reads progress() until nothing is pending, each time the scripts announce a change of the
 * ticket (see ticket-channel.ts), and every `pollMs` in case an announcement was lost; a
 * WaitTimeoutError (with the last progress read, if any) after `timeoutMs`, whether Redis answers
 * or not, and a ClosedError as soon as `closed` aborts (the batcher closed).
 */
export async function waitFor(
  client: RedisClient,
  keyspace: Keyspace,
  channel: TicketChannel,
  ticket: Ticket,
  options: WaitForOptions = {},
  closed?: AbortSignal,
): Promise<Progress> {
  if (typeof options === 'object' && options !== null) onlyKnownOptions('waitFor options', options, WAIT_FOR_OPTIONS);
  const timeoutMs = positiveMs('waitFor options.timeoutMs', options.timeoutMs, 60_000);
  const pollMs = positiveMs('waitFor options.pollMs', options.pollMs, 1_000);
  const onProgress = options.onProgress;
  if (onProgress !== undefined && typeof onProgress !== 'function') {
    throw new InvalidOptionError(`waitFor options.onProgress must be a function, got ${describe(onProgress)}`);
  }
  const { key, id } = parseTicket(ticket);
  const deadline = Date.now() + timeoutMs;
  const left = () => Math.max(0, deadline - Date.now());
  let last: Progress | undefined;
  const timedOut = () =>
    new WaitTimeoutError(
      last
        ? `ticket ${ticket} still has ${last.pending} pending ids after ${timeoutMs} ms`
        : `ticket ${ticket}: Redis gave no reading of it within ${timeoutMs} ms`,
      last,
    );
  // Set by an announcement; a read clears it first, so one that lands during the read is not lost.
  let changed: boolean;
  let wake: (() => void) | undefined;
  const { subscribed, unlisten } = channel.listen(ticketChannel(keyspace.forKey(key)), id, () => {
    changed = true;
    wake?.();
  });
  const { ended, stop } = endedBy(closed, ticket);
  try {
    for (let read = 0; ; read++) {
      // The first read goes while the subscription is made: a ticket settled already costs one read.
      // The second waits for it, so no change announced after that read is missed.
      if (read === 1) await Promise.race([subscribed(Math.min(pollMs, left())), ended]);
      changed = false;
      // A read Redis does not answer (it is away; ioredis queues the command) ends at the deadline.
      const current = await withDeadline(Promise.race([progress(client, keyspace, ticket), ended]), left(), timedOut);
      if (onProgress && !sameCounts(last, current)) onProgress(current);
      last = current;
      if (current.pending <= 0 && current.sealed) return current;
      if (Date.now() >= deadline) throw timedOut();
      if (read === 0 || changed) continue;
      let timer: NodeJS.Timeout | undefined;
      await Promise.race([
        new Promise<void>((resolve) => {
          wake = resolve;
          timer = setTimeout(resolve, Math.min(pollMs, left()));
        }),
        ended,
      ]);
      clearTimeout(timer);
      wake = undefined;
    }
  } finally {
    stop();
    unlisten();
  }
}

/**
 * A promise that rejects with a ClosedError once `closed` aborts (never, without a signal), for
 * a wait to race; `stop` forgets the signal.
 */
function endedBy(closed: AbortSignal | undefined, ticket: Ticket): { ended: Promise<never>; stop: () => void } {
  let onAbort: (() => void) | undefined;
  const ended = new Promise<never>((_, reject) => {
    onAbort = () => reject(new ClosedError(`waitFor(${ticket}) ended: the batcher was closed`));
    if (closed?.aborted) onAbort();
    else closed?.addEventListener('abort', onAbort, { once: true });
  });
  // Raced by every wait, it may reject while none is racing it.
  ended.catch(() => undefined);
  return { ended, stop: () => onAbort && closed?.removeEventListener('abort', onAbort) };
}
