--[[
  Settles a key's previous slice and claims the next one, for the holder of the key's lock.
  List store: FIFO; a restored slice goes back to the head, in order. Keys, arguments and
  reply: see includes/claim-body.lua.
]]
local store = {
  perPush = true,
  inFlightIds = function() return redis.call('LRANGE', KEYS[2], 0, -1) end,
  restore = function(inFlight)
    -- Tail first onto the head keeps the in-flight ids in front, in their order.
    while redis.call('RPOPLPUSH', inFlight, KEYS[1]) do end
  end,
  toInFlight = function(ids)
    for i = 1, #ids, 1000 do
      redis.call('RPUSH', KEYS[2], unpack(ids, i, math.min(i + 999, #ids)))
    end
  end,
  readyIn = function() return nil end,
}
store.takePending = function(count)
  local ids = redis.call('LPOP', KEYS[1], count)
  if ids then store.toInFlight(ids) end
  return ids
end
--- @include "claim-body"
