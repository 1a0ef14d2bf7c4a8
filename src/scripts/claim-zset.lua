--[[
  Settles a key's previous slice and claims the next ready ids, for the holder of the key's lock.
  Readiness is judged by the Redis server's clock, so pushers' and workers' clocks may differ.

  KEYS[1] pending sorted set (score: ready-at ms)    KEYS[2] in-flight sorted set
  KEYS[3] lock                                       KEYS[4] id of the last claim applied
  KEYS[5] failures in a row (deleted on ack: the previous slice succeeded)
  ARGV[1] lock value (fencing: nothing changes unless the caller holds the lock)
  ARGV[2] claim id, unique per call within a job run; a resent call with the same id
          changes nothing and returns the ids already in flight
  ARGV[3] 'ack': the in-flight ids are done, drop them
          'restore': put them back into pending, unless re-added meanwhile (the newer time wins)
  ARGV[4] how many ids to claim; 0 settles only

  Returns {1, waitMs, id...}: the claimed ids, earliest first; when none is ready but some are
          pending, waitMs is how long until the earliest one is ready (else 0)
          {-1}: the lock is not held with this value
]]
--- @include "settle-previous"
local early = settlePrevious(
  function() return redis.call('ZRANGE', KEYS[2], 0, -1) end,
  function()
    local inFlight = redis.call('ZRANGE', KEYS[2], 0, -1, 'WITHSCORES')
    for i = 1, #inFlight, 2 do
      redis.call('ZADD', KEYS[1], 'NX', inFlight[i + 1], inFlight[i])
    end
    redis.call('DEL', KEYS[2])
  end)
if early then return early end

local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
local result = {1, 0}
local count = tonumber(ARGV[4])
if count > 0 then
  local ready = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now, 'WITHSCORES', 'LIMIT', 0, count)
  for i = 1, #ready, 2 do
    redis.call('ZREM', KEYS[1], ready[i])
    redis.call('ZADD', KEYS[2], ready[i + 1], ready[i])
    result[#result + 1] = ready[i]
  end
  if #ready == 0 then
    local first = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
    if first[2] then result[2] = math.max(1, tonumber(first[2]) - now) end
  end
end

--- @include "remember-claim"
return result
