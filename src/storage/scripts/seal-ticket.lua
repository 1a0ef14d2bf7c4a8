--[[
  Seals an open ticket: no push may add to it any more, and it settles once its ids are all done
  or dead (at once if they are already). An open ticket is created with `sealed` '0' (see
  tickets.ts); a ticket without `sealed` was sealed at its push.

  KEYS[1] the key's base name: every name of the key is derived from it (see keys.ts); the
          ticket's hash is its ticket prefix followed by ARGV[1]
  ARGV[1] the ticket's id

  Returns REPLY.ok: sealed, and settled now (wanting a callback: it is in the outbox); 0: sealed,
  ids still pending (the call that counts the last one settles it); REPLY.unknownTicket: unknown
  or expired; REPLY.sealedTicket: already sealed.
]]
--- @include "keyspace"
--- @include "tracking"
local K = keyNames(KEYS[1], 0)
local hash = K.ticketPrefix .. ARGV[1]
local sealed = redis.call('HGET', hash, 'sealed')
if redis.call('EXISTS', hash) == 0 then return REPLY.unknownTicket end
if sealed ~= '0' then return REPLY.sealedTicket end
redis.call('HSET', hash, 'sealed', '1')
local log = ticketLog()
announceTicket(log, K.ticketPrefix, ARGV[1])
if settleTicket(log, hash, ARGV[1], K.settledTickets) and #log.settled > 0 then return REPLY.ok end
return 0
