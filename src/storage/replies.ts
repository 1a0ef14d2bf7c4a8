/**
 * The codes scripts reply with, shared with Lua: scripts/index.ts writes them into the
 * `keyspace` include as REPLY and CLAIM_REPLY_HEAD, so neither side spells a bare number the
 * other could drift from. Each script's header says which it returns.
 */
export const REPLY = {
  /** Done (a fenced call whose caller holds the lock). */
  ok: 1,
  /** The key's lock is held with another value, or not at all: the call changed nothing. */
  lockNotHeld: -1,
  /** release.lua: released, but ids are pending or backing off: the run's job must be requeued. */
  releasedWithPending: 2,
  /** push.lua, seal-ticket.lua: the open ticket is unknown or expired (nothing written). */
  unknownTicket: -2,
  /** push.lua, seal-ticket.lua: the open ticket is sealed already (nothing written). */
  sealedTicket: -3,
  /** push.lua, backlog-check.lua: the push would take the key past its maxPendingPerKey (nothing written). */
  backlogFull: -4,
  /** push.lua: a key the push would write holds another type (nothing written; see its header). */
  wrongType: -5,
} as const;

/** How many fields a claim's reply has before its claimed ids (see includes/claim-key.lua). */
export const CLAIM_REPLY_HEAD = 8;
