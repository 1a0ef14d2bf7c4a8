--[[
  Seals an open ticket: no push may add to it any more, and it settles once its ids are all done
  or dead (at once if they are already). An open ticket is created with `sealed` '0' (see
  tickets.ts); a ticket without `sealed` was sealed at its push.

  KEYS[1] the ticket's hash        KEYS[2] the key's outbox of settled tickets
  ARGV[1] the ticket's id

  Returns 1: sealed, and settled now (wanting a callback: it is in the outbox); 0: sealed, ids
  still pending (the call that counts the last one settles it); -2: unknown or expired;
  -3: already sealed.
]]
--- @include "tracking"
local sealed = redis.call('HGET', KEYS[1], 'sealed')
if redis.call('EXISTS', KEYS[1]) == 0 then return -2 end
if sealed ~= '0' then return -3 end
redis.call('HSET', KEYS[1], 'sealed', '1')
if settleTicket(KEYS[1], ARGV[1], KEYS[2]) and #settledTickets > 0 then return 1 end
return 0
