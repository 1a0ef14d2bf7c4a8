--[[
  Releases a key's lock, if the caller still holds it, at the end of a run that did not release it
  in its last claim (a run with lanes, or one that stopped early).

  KEYS[1] the key's base name: every name of the key is derived from it (see keys.ts)
  ARGV[1] lock value
  ARGV[2] 'ack':  the in-flight slice succeeded: drop it (and count it done on its tickets);
                  every lane of a run with lanes has settled by now, so its mark goes too
          'keep': leave the in-flight ids for the next run to recover (a failed run of them)

  Returns {status, settled}: `settled` the tickets the ack settled that want a callback,
  space-separated ('' for none); status REPLY.ok: released, nothing pending;
  REPLY.releasedWithPending: released, but ids are pending (at either level) or backing off (pushes skip the job
  add while the lock is held, see push.lua: the caller must requeue the key's job rather than
  complete it), unless the key is paused until resumed (resume adds the job);
  REPLY.lockNotHeld: the lock is not held with this value (nothing changed)
]]
--- @include "keyspace"
--- @include "tracking"
--- @include "extras"
local K = keyNames(KEYS[1], 0)
if redis.call('GET', K.lock) ~= ARGV[1] then return {REPLY.lockNotHeld, ''} end
redis.call('DEL', K.lock, K.lastClaim)
local log = ticketLog()
if ARGV[2] == 'ack' then
  redis.call('DEL', K.inFlight, K.inFlightMark, K.inFlightSlice, K.payloadsInFlight, K.lanes, K.inFlightHigh)
  creditAll(log, K.trackedInFlight, K.ticketPrefix, K.settledTickets, 'done')
end
dropExtrasIfNone(K)
local settled = table.concat(log.settled, ' ')
if redis.call('EXISTS', K.pending, K.pendingHigh, K.retry) > 0 and redis.call('PTTL', K.paused) ~= -1 then
  return {REPLY.releasedWithPending, settled}
end
return {REPLY.ok, settled}
