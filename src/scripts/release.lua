--[[
  Releases a key's lock, if the caller still holds it.

  KEYS[1] lock    KEYS[2] in-flight ids    KEYS[3] id of the last claim applied
  KEYS[4] tracked ids in flight            KEYS[5] ticket prefix
  KEYS[6] mark of the slice in flight (see includes/claim-body.lua)
  ARGV[1] lock value
  ARGV[2] 'ack':  the in-flight slice succeeded: drop it (and count it done on its tickets)
          'keep': leave the in-flight ids for the next run to recover (a failed run of them)

  Returns 1: released; -1: the lock is not held with this value (nothing changed)
]]
--- @include "tracking"
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return -1 end
redis.call('DEL', KEYS[1], KEYS[3])
if ARGV[2] == 'ack' then
  redis.call('DEL', KEYS[2], KEYS[6])
  creditAll(KEYS[4], KEYS[5], 'done')
end
return 1
