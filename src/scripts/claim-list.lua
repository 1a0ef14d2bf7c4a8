--[[
  Settles a key's previous slice and claims the next one, for the holder of the key's lock.

  KEYS[1] pending list      KEYS[2] in-flight list
  KEYS[3] lock              KEYS[4] id of the last claim applied
  KEYS[5] failures in a row (deleted on ack: the previous slice succeeded)
  ARGV[1] lock value (fencing: nothing changes unless the caller holds the lock)
  ARGV[2] claim id, unique per call within a job run; a resent call with the same id
          changes nothing and returns the ids already in flight
  ARGV[3] 'ack': the in-flight ids are done, drop them
          'restore': put them back at the head of pending, in order (error or recovery)
  ARGV[4] how many ids to claim; 0 settles only

  Returns {1, 0, id...}: the claimed ids, in FIFO order (0: nothing to wait for in a list)
          {-1}: the lock is not held with this value
]]
--- @include "settle-previous"
local early = settlePrevious(
  function() return redis.call('LRANGE', KEYS[2], 0, -1) end,
  function()
    -- Tail first onto the head keeps the in-flight ids in front, in their order.
    while redis.call('RPOPLPUSH', KEYS[2], KEYS[1]) do end
  end)
if early then return early end

local result = {1, 0}
local count = tonumber(ARGV[4])
if count > 0 then
  local ids = redis.call('LPOP', KEYS[1], count)
  if ids then
    for i = 1, #ids, 1000 do
      redis.call('RPUSH', KEYS[2], unpack(ids, i, math.min(i + 999, #ids)))
    end
    for i = 1, #ids do result[i + 2] = ids[i] end
  end
end

--- @include "remember-claim"
return result
