-- Push marks (lag bookkeeping) for the claims (see store-list.lua, store-set.lua).
--- @include "clock"

-- List store: consumes the marks of `n` ids claimed from the head; returns the push time of the
-- first of them (`fallback` when marks are missing, e.g. ids pushed by an older version). A
-- mark is popped whole; one that covers more ids than were claimed goes back with the rest.
local function takeMarks(marks, n, fallback)
  local first
  while n > 0 do
    local head = redis.call('LPOP', marks)
    if not head then break end
    local at, count = string.match(head, '^(%d+) (%d+)$')
    count = tonumber(count)
    first = first or at
    if count > n then redis.call('LPUSH', marks, at .. ' ' .. (count - n)) end
    n = n - count
  end
  return first or fallback
end

-- The mark of a slice in flight (its key: `markKey`), for a restore; a slice claimed without
-- one counts from now.
local function inFlightMark(markKey)
  return redis.call('GET', markKey) or clockMs()
end
