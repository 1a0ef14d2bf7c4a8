import { randomUUID } from 'node:crypto';
import { TicketSealedError, UnknownTicketError } from '../core/errors';
import { ticketHash } from '../storage/keys';
import { sealTicket as sealScript } from '../storage/protocol';
import { parseTicket } from './progress';
import { ticketOf, type TicketOutbox } from '../storage/ticket-outbox';
import type { Key, Ticket } from '../core/types';

/** Open tickets, from a producer: created empty, added to by pushes, sealed (see ticket-outbox.ts for what a settled ticket does). */

/** Creates an open ticket of `key`: pushes add to it (`{ ticket }`) until `sealTicket`. */
export async function openTicket(outbox: TicketOutbox, key: Key, callback: boolean): Promise<Ticket> {
  return ticketOf(key, await open(outbox, key, callback));
}

/** Seals an open ticket; if it settles at once, adds its callback. */
export async function sealTicket(outbox: TicketOutbox, ticket: Ticket): Promise<void> {
  const { key, id } = parseTicket(ticket);
  await seal(outbox, key, id, ticket);
}

/** A ticket of `key` with no ids: opened and sealed, so it is settled at once (and calls back, if asked). */
export async function settledTicket(outbox: TicketOutbox, key: Key, callback: boolean): Promise<Ticket> {
  const id = await open(outbox, key, callback);
  const ticket = ticketOf(key, id);
  await seal(outbox, key, id, ticket);
  return ticket;
}

/** Writes an open ticket's hash; returns its id. */
async function open(outbox: TicketOutbox, key: Key, callback: boolean): Promise<string> {
  const { deps } = outbox;
  const id = randomUUID();
  const hash = ticketHash(deps.keyspace.forKey(key), id);
  await deps.client
    .multi()
    .hset(hash, { total: 0, done: 0, failed: 0, dropped: 0, sealed: '0', ttl: deps.ticketTtlMs, cb: callback ? '1' : '0' })
    .pexpire(hash, deps.ticketTtlMs)
    .exec();
  return id;
}

async function seal(outbox: TicketOutbox, key: Key, id: string, ticket: Ticket): Promise<void> {
  const { deps } = outbox;
  const sealed = await sealScript(deps.client, deps.keyspace.forKey(key), id);
  if (sealed === 'unknown')
    throw new UnknownTicketError(`ticket ${ticket} is unknown or expired (open tickets live ticketTtlMs after their last push)`);
  if (sealed === 'sealed_already') throw new TicketSealedError(`ticket ${ticket} is sealed already`);
  if (sealed === 'settled') await outbox.hand(key, [id]);
}
