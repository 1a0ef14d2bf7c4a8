-- The zset store's side of a claim: readiness is judged by the Redis server's clock, so pushers'
-- and workers' clocks may differ; a restored id goes back at its time unless re-added meanwhile
-- (the newer time wins). Functions that write its keys take their names first (K).
--- @include "clock"
--- @include "chunked"
local function zsetStore()
  return {
    kind = 'zset',
    perPush = false,
    inFlightIds = function(inFlight) return redis.call('ZRANGE', inFlight, 0, -1) end,
    restore = function(K, inFlight)
      local ids = redis.call('ZRANGE', inFlight, 0, -1, 'WITHSCORES')
      for i = 1, #ids, 2 do
        redis.call('ZADD', K.pending, 'NX', ids[i + 1], ids[i])
      end
      redis.call('DEL', inFlight)
    end,
    toInFlight = function(K, ids, now)
      local scored = {}
      for _, id in ipairs(ids) do
        scored[#scored + 1] = now
        scored[#scored + 1] = id
      end
      chunked('ZADD', K.inFlight, scored)
    end,
    takePending = function(K, count)
      local ready = redis.call('ZRANGEBYSCORE', K.pending, '-inf', clockMs(), 'WITHSCORES', 'LIMIT', 0, count)
      local ids, scored = {}, {}
      -- The earliest ready time of the slice, for push-to-processed latency.
      if ready[2] then redis.call('SET', K.inFlightMark, ready[2]) end
      for i = 1, #ready, 2 do
        ids[#ids + 1] = ready[i]
        scored[#scored + 1] = ready[i + 1]
        scored[#scored + 1] = ready[i]
      end
      chunked('ZREM', K.pending, ids)
      chunked('ZADD', K.inFlight, scored)
      return ids, ready[2]
    end,
  }
end
