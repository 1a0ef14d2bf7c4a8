import { JOB_NAME, type KeyQueue } from './job';
import { encodeKey, type KeyNames, type Keyspace } from './keys';
import type { RedisClient } from './scripts';
import type { Key, Ticket } from '../core/types';

/**
 * The outbox of settled tickets, and their callback jobs. A ticket settles when its every id is done or dead
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
export const ticketOf = (key: Key, id: string): Ticket => `${encodeKey(key)}.${id}`;

/**
 * The one owner of "a settled ticket's callback job is added, then the ticket leaves its key's
 * outbox": whatever settled tickets (a claim's ack, a slice settled or failed, a release, a seal)
 * hands them here, and the recovery sweep drains what a crash left. Built once per batcher.
 * @internal
 */
export class TicketOutbox {
  constructor(readonly deps: TicketDeps) {}

  /** Adds the callback jobs of settled tickets of `key`, then takes them out of the key's outbox. */
  async hand(key: Key, ticketIds: readonly string[]): Promise<void> {
    if (ticketIds.length === 0) return;
    const { deps } = this;
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
  async drain(key: Key, names: KeyNames): Promise<number> {
    const left = await this.deps.client.lrange(names.settledTickets, 0, -1);
    if (left.length > 0) await this.hand(key, [...new Set(left)]);
    return left.length;
  }
}
