--[[
  Releases a key's lock, if the caller still holds it, at the end of a run that did not release it
  in its last claim (a run with lanes, or one that stopped early).

  KEYS[1] lock    KEYS[2] in-flight ids    KEYS[3] id of the last claim applied
  KEYS[4] tracked ids in flight            KEYS[5] ticket prefix
  KEYS[6] mark of the slice in flight (see includes/claim-key.lua)
  KEYS[7] pending ids                      KEYS[8] retry (failed slices)
  KEYS[9] paused (by an operator)          KEYS[10] data per id in flight
  KEYS[11] the key's outbox of settled tickets (see includes/tracking.lua)
  KEYS[12] the mark of a run with lanes (see keys.ts `lanes`): with 'ack' every lane is settled
  ARGV[1] lock value
  ARGV[2] 'ack':  the in-flight slice succeeded: drop it (and count it done on its tickets)
          'keep': leave the in-flight ids for the next run to recover (a failed run of them)

  Returns {status, settled}: `settled` the tickets the ack settled that want a callback,
  space-separated ('' for none); status 1: released, nothing pending; 2: released, but ids are pending or backing off (pushes
  skip the job add while the lock is held, see push.lua: the caller must requeue the key's job
  rather than complete it), unless the key is paused until resumed (resume adds the job); -1: the lock is not held with this value (nothing changed)
]]
--- @include "tracking"
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return {-1, ''} end
redis.call('DEL', KEYS[1], KEYS[3])
if ARGV[2] == 'ack' then
  redis.call('DEL', KEYS[2], KEYS[6], KEYS[10], KEYS[12])
  creditAll(KEYS[4], KEYS[5], KEYS[11], 'done')
end
local settled = table.concat(settledTickets, ' ')
if redis.call('EXISTS', KEYS[7], KEYS[8]) > 0 and redis.call('PTTL', KEYS[9]) ~= -1 then return {2, settled} end
return {1, settled}
