-- Priority per push (`priority: 'high'`): a key's high-priority ids wait in a store of their own
-- (K.pendingHigh, of the key's store type, with its own push marks K.pushMarksHigh), written only
-- by pushes that ask for it, which mark the key's extras (see extras.lua): a key that never uses
-- priority has none, and its claims never look for them. A claim takes its slice from the high
-- store while that holds ids (a zset's: ready ones) and from pending otherwise, so a slice holds
-- ids of one level, each level in its store's order (FIFO for a list). Which level the slice in
-- flight came from is kept (K.inFlightHigh) for a restore to put it back there.
--
-- The set and zset stores keep one copy of a waiting id: a high push of an id pending at the
-- normal level moves it up, and a claim drops the ids it takes from the other level's store
-- (an id pushed at the normal level while it waited at high, say).
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

-- Drops `ids` (args[first..last]) from a set or zset store (a list keeps each push apart).
local function dropWaiting(kind, pending, args, first, last)
  if kind == 'set' then
    chunked('SREM', pending, args, first, last)
  elseif kind == 'zset' then
    chunked('ZREM', pending, args, first, last)
  end
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
      dropWaiting(store.kind, K.pending, ids, 1, #ids)
      return ids, mark, H
    end
    -- Only a zset's high ids can wait while pending ones are claimed: none of them is ready yet.
    if filling then return nil end
    ids, mark = store.takePending(K, count)
    if ids and #ids > 0 then dropWaiting(store.kind, K.pendingHigh, ids, 1, #ids) end
    return ids, mark, K
  end
  if filling then return nil end
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
