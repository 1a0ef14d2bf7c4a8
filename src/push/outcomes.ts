import { ClosedError, PushOutcomeUnknownError, TicketSealedError, UnknownTicketError, WrongTypeError } from '../core/errors';
import { backlogFullError } from './backlog';
import type { Committed } from '../storage/committer';
import type { PushRefusal, PushResult } from '../storage/protocol';
import type { Key } from '../core/types';

/**
 * What a push's promise says of what came of its script call (see committer.ts): its result; a
 * refusal or Redis's error reply, when that answer is definite (the push wrote nothing); a
 * ClosedError for a call never sent (its connection ended first: it wrote nothing); else a
 * PushOutcomeUnknownError carrying what ended it, as only then may a rejected push have stored
 * its ids.
 */
export function outcomeOf(key: Key, committed: Committed): PushResult {
  if ('notSent' in committed) {
    throw new ClosedError(
      `performBatchLater for key ${JSON.stringify(key)} was not sent: its connection was closed first (close()); nothing was written`,
    );
  }
  if ('unknown' in committed) throw unknownOutcome(key, committed.unknown);
  const { reply, definite } = committed;
  if (reply instanceof Error) throw definite ? reply : unknownOutcome(key, reply);
  if (reply.refused === undefined) return reply;
  const refusal = refusalError(key, reply.refused);
  throw definite ? refusal : unknownOutcome(key, refusal);
}

/** A push whose ids are stored but whose key's job could not be added. */
export function jobAddFailed(key: Key, cause: unknown): PushOutcomeUnknownError {
  return new PushOutcomeUnknownError(
    `performBatchLater for key ${JSON.stringify(key)} stored its ids, but adding the key's job failed (${messageOf(cause)}); ` +
      `the workers' recovery sweep serves the key. ${RETRY}`,
    { cause },
  );
}

/** What a retry of a push whose outcome is unknown does, for the messages that say so. */
const RETRY = 'A retry is at least once: the set and zset stores keep one copy of a pending id, the list store stores it twice';

function unknownOutcome(key: Key, cause: unknown): PushOutcomeUnknownError {
  return new PushOutcomeUnknownError(
    `performBatchLater for key ${JSON.stringify(key)} cannot tell whether Redis stored its ids (its script call was sent, then: ` +
      `${messageOf(cause)}). They may have been stored, and then they run. ${RETRY}`,
    { cause },
  );
}

function refusalError(key: Key, refused: PushRefusal): Error {
  if (refused.reason === 'backlog_full') return backlogFullError(key, refused);
  if (refused.reason === 'wrong_type') {
    return new WrongTypeError(
      `performBatchLater for key ${JSON.stringify(key)} was refused (WRONGTYPE): Redis key ${refused.name} is a ${refused.found}, ` +
        `not the ${refused.wanted} this batcher keeps there (another client wrote it?); nothing was written`,
      refused.name,
      refused.found,
      refused.wanted,
    );
  }
  if (refused.reason === 'unknown_ticket') {
    return new UnknownTicketError(
      `the open ticket of this push is unknown or expired (open tickets live ticketTtlMs after their last push); nothing was written`,
    );
  }
  return new TicketSealedError('the open ticket of this push is sealed: open a new one; nothing was written');
}

function messageOf(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}
