-- The set store's side of a claim: no order; a restored slice merges back into pending. Push
-- mark: when pending last went from empty to non-empty, an upper bound of its oldest id's age
-- (SPOP takes ids in no order, so no exact one is cheap). Functions that write its keys take their names first (K).
--- @include "marks"
--- @include "chunked"
local function setStore()
  local store = {
    kind = 'set',
    perPush = false,
    inFlightIds = function(inFlight) return redis.call('SMEMBERS', inFlight) end,
    restore = function(K, inFlight, markKey)
      if redis.call('EXISTS', inFlight) == 0 then return end
      redis.call('SUNIONSTORE', K.pending, K.pending, inFlight)
      redis.call('DEL', inFlight)
      -- The restored ids have waited since their own mark, older than any later push's.
      local mark = inFlightMark(markKey)
      local since = redis.call('GET', K.pushMarks)
      if not since or tonumber(since) > tonumber(mark) then redis.call('SET', K.pushMarks, mark) end
    end,
    toInFlight = function(K, ids) chunked('SADD', K.inFlight, ids) end,
  }
  store.takePending = function(K, count)
    local ids = redis.call('SPOP', K.pending, count)
    -- Nothing to take: the claim that emptied pending took its mark (and oneCopy, see
    -- priority.lua, drops the mark of the ids it moves up).
    if #ids == 0 then return ids, nil end
    -- Pending is empty now (fewer than asked, or exactly the rest): the mark goes as it is read,
    -- so the next push starts a new one. A mark left behind would date every later push's ids
    -- from it (lag, wait to fill).
    local emptied = #ids < count or redis.call('EXISTS', K.pending) == 0
    local since = redis.call(emptied and 'GETDEL' or 'GET', K.pushMarks) or clockMs()
    store.toInFlight(K, ids)
    redis.call('SET', K.inFlightMark, since)
    return ids, since
  end
  return store
end
