-- Lag bookkeeping (see store-list.lua, store-set.lua): when a key's pending ids were pushed.
--
-- A list store's marks (K.pushMarks) are written by the push that finds pending empty and by
-- claims, never by the pushes in between: a list of entries `sinceMs count`, oldest first. Each
-- entry but the last covers the next `count` pending ids, pushed at or after `sinceMs` (and
-- before the next entry's); the last one (open) covers every id after them, those pushed since,
-- and counts the ids ahead of it instead. The push that finds pending empty starts the list,
-- `nowMs 0`: exact for its ids. A claim that leaves ids closes the open entry (it covers the
-- ids pushed since the last claim) and opens one at its own time; a claim that empties pending
-- drops them. So the head entry dates the oldest pending id exactly if it came with the push
-- that found pending empty (always, for a key that drains between claims), and otherwise at most
-- one claim interval early: the pushes made while one slice ran share the time of the claim
-- before (those made before the key's first claim, the first push's). Entries are `%d+ %d+`, as
-- earlier versions' per-push marks were: versions read each other's (as coarse lag until the
-- key's pending empties), never fail on them.
--- @include "clock"

local function markOf(entry)
  local since, count = string.match(entry or '', '^(%d+) (%d+)$')
  return since, tonumber(count)
end

-- The push that finds a list's pending empty (`marks`: its marks) starts them at `now`. Marks
-- left behind a drained key are an earlier version's per-push ones (a rolling deploy: see
-- takeMarks), which would date this push's ids: they go here, in the rare push that finds them,
-- not in every claim that empties a key.
local function startMarks(marks, now)
  if redis.call('RPUSH', marks, now .. ' 0') > 1 then redis.call('LTRIM', marks, -1, -1) end
end

-- A list's claim of `n` ids from the head, `left` ids left: consumes their marks, leaves the first
-- one's (the slice's oldest id's) as the in-flight mark (`markKey`, a list of it alone: see
-- listInFlightMark) and returns it; `clockMs()`, and no in-flight mark, when there is none (a key
-- pushed to by a version before marks, or whose marks a failover lost).
local function takeMarks(marks, markKey, n, left)
  if left == 0 then
    -- Pending is empty: the head entry dates the slice, the rest goes. Moved, it is the in-flight
    -- mark in one call; the open entry is the head only with nothing ahead of it (`t 0`), and so
    -- the only one this version writes: its list went with it. An earlier version's per-push
    -- marks may still follow it (a rolling deploy): the push that next finds pending empty drops
    -- them (startMarks), so a one-slice run pays no DEL for them.
    local since, ahead = markOf(redis.call('LMOVE', marks, markKey, 'LEFT', 'LEFT'))
    if ahead ~= 0 then redis.call('DEL', marks) end
    return since or clockMs()
  end
  local now = clockMs()
  local since, ahead = markOf(redis.call('RPOP', marks))
  if not since then since, ahead = now, 0 end
  -- The closed entries' ids go first: the slice's mark is the first entry's.
  local first, taking = nil, math.min(n, ahead)
  while taking > 0 do
    local at, count = markOf(redis.call('LPOP', marks))
    if not at then break end
    first = first or at
    if count > taking then redis.call('LPUSH', marks, at .. ' ' .. (count - taking)) end
    taking = taking - count
  end
  -- The open entry's ids left (pushed since it opened) close it; every id left was pushed
  -- before now, so the next open entry starts here with all of them ahead.
  local openLeft = left - math.max(0, ahead - n)
  if openLeft > 0 then
    redis.call('RPUSH', marks, since .. ' ' .. openLeft, now .. ' ' .. left)
  else
    redis.call('RPUSH', marks, now .. ' ' .. left)
  end
  first = first or since
  redis.call('RPUSH', markKey, first)
  return first
end

-- A list's slice of `n` ids given back to the head of pending, with its mark `mark`: its entry
-- goes in front, counted among the ids ahead of the open entry (one opened now, if pending was
-- empty: the ids pushed after the restore are not as old as the slice).
local function restoreMarks(marks, mark, n)
  local since, ahead = markOf(redis.call('RPOP', marks))
  if since then
    redis.call('LPUSH', marks, mark .. ' ' .. n)
    redis.call('RPUSH', marks, since .. ' ' .. (ahead + n))
  else
    redis.call('RPUSH', marks, mark .. ' ' .. n, clockMs() .. ' ' .. n)
  end
end

-- The mark of a slice in flight (its key: `markKey`), for a restore; a slice claimed without
-- one counts from now. The set store's is a string; the list store's a list (see takeMarks).
local function inFlightMark(markKey)
  return redis.call('GET', markKey) or clockMs()
end

local function listInFlightMark(markKey)
  return string.match(redis.call('LINDEX', markKey, 0) or '', '^(%d+)') or clockMs()
end
