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

-- A sliding window: `log` lists `claimMs count` per claim, oldest first, so "at most `max` ids
-- in any `windowMs`" holds exactly (a token bucket would let up to twice that through one window
-- after an idle spell). Entries are claims, not ids: a window holds at most max / slice of them.
-- Returns how many ids may be claimed now, and, when fewer than `need`, ms until `need` may.
local function rateAllowance(log, max, windowMs, need)
  local now = clockMs()
  local entries = redis.call('LRANGE', log, 0, -1)
  local live, used = {}, 0
  for _, entry in ipairs(entries) do
    local at, n = string.match(entry, '^(%d+) (%d+)$')
    at, n = tonumber(at), tonumber(n)
    if at + windowMs > now then
      live[#live + 1] = {at, n}
      used = used + n
    end
  end
  -- Expired entries are dropped from the head (claims are logged in clock order).
  local expired = #entries - #live
  if expired > 0 then redis.call('LTRIM', log, expired, -1) end
  local allowance = max - used
  if allowance >= need then return allowance, 0 end
  local freed = allowance
  for _, entry in ipairs(live) do
    freed = freed + entry[2]
    if freed >= need then return math.max(0, allowance), entry[1] + windowMs - now end
  end
  return math.max(0, allowance), windowMs
end

-- Logs a claim of `n` ids; the log lives as long as its newest entry counts.
local function rateSpend(log, n, windowMs)
  redis.call('RPUSH', log, clockMs() .. ' ' .. n)
  redis.call('PEXPIRE', log, windowMs)
end
