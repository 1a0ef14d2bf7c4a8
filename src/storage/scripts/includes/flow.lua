-- Flow control: when may a key claim, and how many ids? Functions of their keys and arguments.
--- @include "clock"

-- How long the key must wait before it may claim anything: nil when it may claim now, -1 while
-- an operator paused it until resumed, else ms until its pause (`paused`, PX when timed) or its
-- hold (`hold`: a rate limit or a handler's retryAfter, always PX) ends, whichever is later.
local function heldFor(paused, hold)
  -- Almost never either: one call for the common case.
  if redis.call('EXISTS', paused, hold) == 0 then return nil end
  local wait
  local pausedTtl = redis.call('PTTL', paused)
  if pausedTtl == -1 then return -1 end
  if pausedTtl > 0 then wait = pausedTtl end
  local holdTtl = redis.call('PTTL', hold)
  if holdTtl > 0 and (not wait or holdTtl > wait) then wait = holdTtl end
  return wait
end

-- Holds the key for `ms` more, unless a longer hold is set already.
local function holdFor(hold, ms)
  if ms > 0 and redis.call('PTTL', hold) < ms then redis.call('SET', hold, 'held', 'PX', ms) end
end

-- A handler asked the key to wait `ms` (retryAfter): it waits at least RETRY_AFTER_FLOOR_MS, and,
-- when this is one more ask in a row (`again`: the slice that asked goes back; an ack of a slice
-- that succeeded ends the streak), at least the floor doubled per earlier ask, up to
-- RETRY_AFTER_MAX_BACKOFF_MS. Returns the hold.
local function holdAfter(hold, streak, ms, again)
  local floor = RETRY_AFTER_FLOOR_MS
  if again then
    local asks = redis.call('INCR', streak)
    floor = math.min(RETRY_AFTER_MAX_BACKOFF_MS, floor * 2 ^ (asks - 1))
  end
  local wait = math.max(ms, floor)
  if again then redis.call('PEXPIRE', streak, wait + RETRY_AFTER_MAX_BACKOFF_MS) end
  holdFor(hold, wait)
  return wait
end

-- A sliding window: `log` lists `claimMs count` per claim, oldest first, and `used` holds their
-- sum, so "at most `max` ids in any `windowMs`" holds exactly (a token bucket would let up to
-- twice that through one window after an idle spell). Each claim drops the expired head entries
-- and reads the sum: O(1) amortized, however many claims a window holds. Claims within 0.5 % of
-- a window of the newest entry join it, stamped with the later time (so they expire later, never
-- earlier): at most about 200 entries per window.
-- Returns how many ids may be claimed now, and, when fewer than `need`, ms until `need` may.
local function rateAllowance(log, used, max, windowMs, need)
  local now = clockMs()
  local sum = tonumber(redis.call('GET', used) or '0')
  while true do
    local head = redis.call('LINDEX', log, 0)
    if not head then
      sum = 0
      break
    end
    local at, n = string.match(head, '^(%d+) (%d+)$')
    if tonumber(at) + windowMs > now then break end
    redis.call('LPOP', log)
    sum = sum - tonumber(n)
  end
  redis.call('SET', used, math.max(0, sum), 'PX', windowMs)
  local allowance = max - sum
  if allowance >= need then return allowance, 0 end
  -- Limited (rarely): how long until the oldest entries free enough.
  local freed = allowance
  for _, entry in ipairs(redis.call('LRANGE', log, 0, -1)) do
    local at, n = string.match(entry, '^(%d+) (%d+)$')
    freed = freed + tonumber(n)
    if freed >= need then return math.max(0, allowance), tonumber(at) + windowMs - now end
  end
  return math.max(0, allowance), windowMs
end

-- Logs a claim of `n` ids; the log and its sum live as long as the newest entry counts.
local function rateSpend(log, used, n, windowMs)
  local now = clockMs()
  local tail = redis.call('LINDEX', log, -1)
  local at, count
  if tail then at, count = string.match(tail, '^(%d+) (%d+)$') end
  if at and now - tonumber(at) < windowMs / 200 then
    redis.call('LSET', log, -1, now .. ' ' .. (tonumber(count) + n))
  else
    redis.call('RPUSH', log, now .. ' ' .. n)
  end
  redis.call('PEXPIRE', log, windowMs)
  redis.call('INCRBY', used, n)
  redis.call('PEXPIRE', used, windowMs)
end
