-- Wait to fill (core/fill.ts): a key's pending ids are due once at least `minSize` of them are
-- ready, or once the oldest ready one has waited `maxWaitMs`, whichever comes first. A
-- `minSize` of 1 or less (or a `maxWaitMs` of 0) is no wait: every caller then behaves as it did
-- before the option. Pushes, claims and due-in all judge it here.
--- @include "clock"
--- @include "due"
--- @include "bullmq-scores"

-- Ms until the key's pending ids are due, waiting to fill: 0 when they are (or when none is
-- pending). The oldest id's age comes from the push marks (includes/marks.lua): a list's head
-- mark is its oldest id's push, or at most one claim interval before it; a set's is when pending
-- last went from empty (so a list's or set's key may start early, never late); a zset's lowest
-- score is its earliest ready time; a key whose mark is missing (lost with a failover) does not
-- wait.
local function fillWait(kind, K, minSize, maxWaitMs)
  if minSize <= 1 or maxWaitMs <= 0 then return 0 end
  local now = clockMs()
  local since
  if kind == 'zset' then
    if redis.call('ZCOUNT', K.pending, '-inf', now) >= minSize then return 0 end
    since = redis.call('ZRANGE', K.pending, 0, 0, 'WITHSCORES')[2]
    if not since then return 0 end
    local due = tonumber(since) + maxWaitMs
    -- Or when the minSize-th id is ready, if that is sooner.
    local nth = redis.call('ZRANGE', K.pending, minSize - 1, minSize - 1, 'WITHSCORES')[2]
    if nth and tonumber(nth) < due then due = tonumber(nth) end
    return math.max(0, due - now)
  end
  local n = redis.call(kind == 'list' and 'LLEN' or 'SCARD', K.pending)
  if n == 0 or n >= minSize then return 0 end
  if kind == 'list' then
    local head = redis.call('LINDEX', K.pushMarks, 0)
    since = head and string.match(head, '^(%d+)')
  else
    since = redis.call('GET', K.pushMarks)
  end
  if not since then return 0 end
  return math.max(0, tonumber(since) + maxWaitMs - now)
end

-- dueAt (due.lua) for a key whose pending ids wait `filling` ms to fill (fillWait's answer; 0
-- for none): when the key next has something its claim would take, by the Redis clock, or nil
-- for nothing. A failed slice does not wait to fill (its backoff is its wait).
local function filledDueAt(kind, K, filling, skipPending, retrying)
  if filling == 0 then return dueAt(kind, K.pending, K.retry, skipPending, retrying) end
  local due = dueAt(kind, K.pending, K.retry, true, retrying)
  local at = clockMs() + filling
  if not due or at < due then due = at end
  return due
end

-- BullMQ times a delayed job by the clock of the process that delayed it, a push's job add
-- coming a round trip after the push's call: a job due this much after a key's fill ends still
-- counts as due by then, or every push to the key would move its job again.
local FILL_SLACK_MS = 25

-- Whether a delayed job scored `score` in BullMQ's delayed set starts by `at` (ms).
local function startsBy(score, at)
  return tonumber(score) <= bullmqDueScore(at + FILL_SLACK_MS)
end
