-- Priority per push (`priority: 'high'`): a key's high-priority ids wait in a store of their own
-- (K.pendingHigh, of the key's store type, with its own push marks K.pushMarksHigh), written only
-- by pushes that ask for it, which mark the key's extras (see extras.lua): a key that never uses
-- priority has none, and its claims never look for them. A claim takes its slice from the high
-- store while that holds ids (a zset's: ready ones) and from pending otherwise, so a slice holds
-- ids of one level, each level in its store's order (FIFO for a list). Which level the slice in
-- flight came from is kept (K.inFlightHigh) for a restore to put it back there.
--
-- The set and zset stores keep one copy of a waiting id over both levels, so that every count
-- (backlog, stats, maxPendingPerKey) is of distinct ids: each write of waiting ids (a push, a
-- restore) ends with `oneCopy`, which leaves an id waiting at both levels at high, at the earlier
-- of its two times (zset). So a high push of an id waiting at normal moves it up, and an id
-- pushed at normal while it waits at high stays there.
--- @include "chunked"
--- @include "due"

-- The high store's names: the key's own (K), with pending and its push marks swapped for the
-- high ones, so that each store's functions (see stores.lua) serve it unchanged. With the list
-- store, which keeps each push of an id apart, its tickets and data are swapped too: a high push
-- of an id also pending at normal keeps its own, and the claim of the high copy takes them.
local function highNames(K, kind)
  local names = { pending = K.pendingHigh, pushMarks = K.pushMarksHigh }
  if kind == 'list' then
    names.tracked = K.trackedHigh
    names.payloads = K.payloadsHigh
  end
  return setmetatable(names, { __index = K })
end

-- After a write of `ids` (args[first..last]) at either level of a set or zset store: an id now
-- waiting at both stays at high only, at the earlier of its two times (zset). A lookup per 1000
-- ids, and only while both levels hold ids.
local function oneCopy(kind, K, args, first, last)
  if kind == 'list' or redis.call('EXISTS', K.pending) == 0 or redis.call('EXISTS', K.pendingHigh) == 0 then return end
  local lookup = kind == 'set' and 'SMISMEMBER' or 'ZMSCORE'
  for i = first, last, 1000 do
    local chunk = { unpack(args, i, math.min(i + 999, last)) }
    local atHigh, atNormal = redis.call(lookup, K.pendingHigh, unpack(chunk)), redis.call(lookup, K.pending, unpack(chunk))
    local both, earlier = {}, {}
    for j = 1, #chunk do
      -- SMISMEMBER answers 0 for an absent id, ZMSCORE nil (false in Lua).
      if atHigh[j] and atHigh[j] ~= 0 and atNormal[j] and atNormal[j] ~= 0 then
        both[#both + 1] = chunk[j]
        earlier[#earlier + 1] = atNormal[j]
        earlier[#earlier + 1] = chunk[j]
      end
    end
    if #both > 0 then
      redis.call(kind == 'set' and 'SREM' or 'ZREM', K.pending, unpack(both))
      if kind == 'zset' then redis.call('ZADD', K.pendingHigh, 'LT', unpack(earlier)) end
    end
  end
  -- A set's push mark dates its normal ids: none are left to date (see store-set.lua).
  if kind == 'set' and redis.call('EXISTS', K.pending) == 0 then redis.call('DEL', K.pushMarks) end
end

-- The next slice's ids and mark, as store.takePending returns them, and the names of the level
-- they came from (for their tickets and data): taken by level, the high store first, unless the
-- key is `plain` (no extras: then it has no high ids); the normal one unless its ids wait to fill
-- (`filling`; high ones never do, see fill.lua).
local function takeByLevel(store, K, count, plain, filling)
  if not plain and redis.call('EXISTS', K.pendingHigh) == 1 then
    local H = highNames(K, store.kind)
    local ids, mark = store.takePending(H, count)
    if ids and #ids > 0 then
      redis.call('SET', K.inFlightHigh, '1')
      return ids, mark, H
    end
    -- Only a zset's high ids can wait while pending ones are claimed: none of them is ready yet.
    if filling then return nil end
  elseif filling then
    return nil
  end
  local ids, mark = store.takePending(K, count)
  return ids, mark, K
end

-- The names a restore puts the slice in flight back under: the level it was claimed from.
local function restoreNames(K, kind)
  if redis.call('EXISTS', K.inFlightHigh) == 1 then return highNames(K, kind) end
  return K
end

-- A push's wait (ms until its key may claim, -1 for never) with the key's high ids too.
local function waitWithHigh(kind, K, waitMs, now)
  local high = dueAt(kind, K.pendingHigh, K.retry, false, 0)
  if not high then return waitMs end
  high = math.max(0, high - now)
  if waitMs < 0 or high < waitMs then return high end
  return waitMs
end

-- `due` (a dueAt answer for the normal level, see due.lua) with the high ids too, unless the
-- caller skips pending ids or the key is `plain` (no extras: no high ids).
local function withHighDue(kind, K, due, skipPending, plain)
  if plain or skipPending then return due end
  local high = dueAt(kind, K.pendingHigh, K.retry, false, 0)
  if high and (not due or high < due) then return high end
  return due
end
