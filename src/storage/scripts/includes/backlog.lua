-- Backpressure (maxPendingPerKey): whether a push of args[first..last] would take a key's
-- pending ids past `limit`. What counts is what the push would leave pending: every id with the
-- list store (each push of an id is an entry of its own); with a set or zset only the distinct
-- ids not pending already (a push of a pending id adds none). Ids in flight or backing off in
-- retry are not pending: they hold no more than a run's lanes and its failed slices. Both of the
-- key's levels (K: its names) count, an id waiting at either is pending already; `high`: the push
-- writes the high one (see priority.lua).
-- Returns nil when the push fits (or `limit` is 0: none), else the key's pending count and how
-- many ids the push would add. A push that adds nothing always fits, even to a key already past
-- its limit (a limit lowered since, or pushes of a batcher without one).
local function backlogOver(kind, K, high, limit, args, first, last)
  if limit <= 0 then return nil end
  local pendingKey, otherKey = K.pending, K.pendingHigh
  if high then pendingKey, otherKey = otherKey, pendingKey end
  local size = kind == 'list' and 'LLEN' or kind == 'set' and 'SCARD' or 'ZCARD'
  local pending = redis.call(size, pendingKey) + redis.call(size, otherKey)
  local adding = last - first + 1
  if pending + adding <= limit then return nil end
  if kind ~= 'list' then
    -- The exact count only when the push's size alone does not fit: one lookup per 1000 ids.
    local seen, distinct = {}, {}
    for i = first, last do
      if not seen[args[i]] then
        seen[args[i]] = true
        distinct[#distinct + 1] = args[i]
      end
    end
    local lookup = kind == 'set' and 'SMISMEMBER' or 'ZMSCORE'
    adding = 0
    local absent = function(found) return found == 0 or not found end
    for i = 1, #distinct, 1000 do
      local chunk = { unpack(distinct, i, math.min(i + 999, #distinct)) }
      local here, there = redis.call(lookup, pendingKey, unpack(chunk)), redis.call(lookup, otherKey, unpack(chunk))
      -- SMISMEMBER answers 0 for an absent id, ZMSCORE nil (false in Lua).
      for j = 1, #chunk do
        if absent(here[j]) and absent(there[j]) then adding = adding + 1 end
      end
    end
  end
  if adding == 0 or pending + adding <= limit then return nil end
  return pending, adding
end
