-- When a key next has something its claim would take, by the Redis clock (ms), or nil for
-- nothing: its earliest failed slice, and, unless `skipPending` (the key is blocked by failed
-- slices backing off, or the caller knows pending is empty), its earliest pending id: a zset's
-- lowest score, or now for a list or set that holds any. `retrying`, when the caller has counted
-- the failed slices already, spares the read of an empty retry set. Claims, due-in and pushes
-- all judge "due" here.
--- @include "clock"
local function dueAt(kind, pending, retry, skipPending, retrying)
  local due
  if retrying == nil or retrying > 0 then
    local first = redis.call('ZRANGE', retry, 0, 0, 'WITHSCORES')[2]
    if first then due = tonumber(first) end
  end
  if not skipPending then
    local at
    if kind == 'zset' then
      at = redis.call('ZRANGE', pending, 0, 0, 'WITHSCORES')[2]
    elseif redis.call(kind == 'list' and 'LLEN' or 'SCARD', pending) > 0 then
      at = clockMs()
    end
    if at and (not due or tonumber(at) < due) then due = tonumber(at) end
  end
  return due
end
