--[[
  Settles a key's previous slice and claims the next one, for the holder of the key's lock.

  KEYS[1] pending set       KEYS[2] in-flight set
  KEYS[3] lock              KEYS[4] id of the last claim applied
  KEYS[5] failures in a row (deleted on ack: the previous slice succeeded)
  ARGV[1] lock value (fencing: nothing changes unless the caller holds the lock)
  ARGV[2] claim id, unique per call within a job run; a resent call with the same id
          changes nothing and returns the ids already in flight
  ARGV[3] 'ack': the in-flight ids are done, drop them
          'restore': merge them back into pending (error or recovery)
  ARGV[4] how many ids to claim; 0 settles only

  Returns {1, 0, id...}: the claimed ids, in no particular order
          {-1}: the lock is not held with this value
]]
--- @include "settle-previous"
local early = settlePrevious(
  function() return redis.call('SMEMBERS', KEYS[2]) end,
  function()
    redis.call('SUNIONSTORE', KEYS[1], KEYS[1], KEYS[2])
    redis.call('DEL', KEYS[2])
  end)
if early then return early end

local result = {1, 0}
local count = tonumber(ARGV[4])
if count > 0 then
  local ids = redis.call('SPOP', KEYS[1], count)
  for i = 1, #ids, 1000 do
    redis.call('SADD', KEYS[2], unpack(ids, i, math.min(i + 999, #ids)))
  end
  for i = 1, #ids do result[i + 2] = ids[i] end
end

--- @include "remember-claim"
return result
