-- The list store's side of a claim: FIFO; a restored slice goes back to the head, in order. Push
-- marks (see marks.lua): written by the push that finds pending empty and by claims, consumed
-- with the ids; a restored slice gets one entry, its oldest id's mark, in front. Functions that
-- write its keys take their names first (K).
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
      restoreMarks(K.pushMarks, listInFlightMark(markKey), n)
    end,
    toInFlight = function(K, ids) chunked('RPUSH', K.inFlight, ids) end,
  }
  store.takePending = function(K, count)
    local ids = redis.call('LPOP', K.pending, count)
    if not ids then return nil end
    store.toInFlight(K, ids)
    return ids, takeMarks(K.pushMarks, K.inFlightMark, #ids, #ids < count and 0 or redis.call('LLEN', K.pending))
  end
  return store
end
