-- The list store's side of a claim: FIFO; a restored slice goes back to the head, in order. Push
-- marks: one `pushMs count` per push, consumed with the ids; a restored slice gets one mark, its
-- oldest id's push time, in front. Functions that write its keys take their names first (K).
--- @include "marks"
--- @include "chunked"
local function listStore()
  local store = {
    kind = 'list',
    perPush = true,
    inFlightIds = function(inFlight) return redis.call('LRANGE', inFlight, 0, -1) end,
    restore = function(K, inFlight, markKey)
      local n = redis.call('LLEN', inFlight)
      if n == 0 then return end
      -- Tail first onto the head keeps the in-flight ids in front, in their order.
      while redis.call('RPOPLPUSH', inFlight, K.pending) do end
      redis.call('LPUSH', K.pushMarks, inFlightMark(markKey) .. ' ' .. n)
    end,
    toInFlight = function(K, ids) chunked('RPUSH', K.inFlight, ids) end,
  }
  store.takePending = function(K, count)
    local ids = redis.call('LPOP', K.pending, count)
    if not ids then return nil end
    store.toInFlight(K, ids)
    local mark
    if #ids < count then
      -- Pending is empty now, so every mark left was these ids' (or outlived its ids, lost with a
      -- failover, say, and would skew lag for good): the head one is the push time, drop them all.
      -- Popping two takes the one mark there usually is, and its list with it, in one call.
      local marks = redis.call('LPOP', K.pushMarks, '2')
      if marks and marks[2] then redis.call('DEL', K.pushMarks) end
      mark = marks and string.match(marks[1], '^(%d+)') or clockMs()
    else
      mark = takeMarks(K.pushMarks, #ids, clockMs())
    end
    redis.call('SET', K.inFlightMark, mark)
    return ids, mark
  end
  return store
end
