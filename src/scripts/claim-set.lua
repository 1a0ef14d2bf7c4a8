--[[
  Settles a key's previous slice and claims the next one, for the holder of the key's lock.
  Set store: no order; a restored slice merges back into pending. Keys, arguments and reply:
  see includes/claim-body.lua.
]]
local store = {
  perPush = false,
  inFlightIds = function() return redis.call('SMEMBERS', KEYS[2]) end,
  restore = function(inFlight)
    redis.call('SUNIONSTORE', KEYS[1], KEYS[1], inFlight)
    redis.call('DEL', inFlight)
  end,
  toInFlight = function(ids)
    for i = 1, #ids, 1000 do
      redis.call('SADD', KEYS[2], unpack(ids, i, math.min(i + 999, #ids)))
    end
  end,
  readyIn = function() return nil end,
}
store.takePending = function(count)
  local ids = redis.call('SPOP', KEYS[1], count)
  store.toInFlight(ids)
  return ids
end
--- @include "claim-body"
