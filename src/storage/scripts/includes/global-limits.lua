-- The batcher-wide limits (see engine/global-limits.ts): what the limits-*.lua scripts share.
-- Every key of theirs is in KEYS, in the order `limitKeys` (storage/limits-protocol.ts) sends
-- them, all in the batcher's own slot.
--- @include "flow"

local function limitNames()
  return {
    leases = KEYS[1], waiters = KEYS[2], waitersUntil = KEYS[3], waitersSince = KEYS[4], waitSeq = KEYS[5],
    rateLog = KEYS[6], rateUsed = KEYS[7], hold = KEYS[8], counters = KEYS[9], rateWaiters = KEYS[10],
  }
end

-- A waiter's score: its job's level (0 first), then first come, first served within a level.
local LEVEL = 0x100000000

-- Drops lapsed leases (a SIGKILLed worker's, at most a lock TTL after its last renewal) and
-- waiters whose job never came back (their entries lapse a bound after their last wait).
local function dropLapsed(L, now)
  redis.call('ZREMRANGEBYSCORE', L.leases, '-inf', now)
  local lapsed = redis.call('ZRANGEBYSCORE', L.waitersUntil, '-inf', now, 'LIMIT', 0, 100)
  for _, member in ipairs(lapsed) do
    redis.call('ZREM', L.waiters, member)
    redis.call('ZREM', L.waitersSince, member)
    redis.call('ZREM', L.waitersUntil, member)
    redis.call('ZREM', L.rateWaiters, member)
  end
end

-- Settles an earlier reservation of the rate window: `n` ids reserved at `at` went unclaimed
-- (n < 0: more were claimed, a failed slice run again whole, and are spent now). Those tokens sit
-- in the earliest log entry stamped at or after `at` (entries are only ever restamped later);
-- once that entry would have expired there is nothing left to give back.
local function rateSettle(L, at, n, windowMs)
  if n == 0 or windowMs <= 0 then return end
  if n < 0 then return rateSpend(L.rateLog, L.rateUsed, -n, windowMs) end
  if at + windowMs <= clockMs() then return end
  local index, stamp, count
  for i = redis.call('LLEN', L.rateLog) - 1, 0, -1 do
    local t, c = string.match(redis.call('LINDEX', L.rateLog, i), '^(%d+) (%d+)$')
    if tonumber(t) < at then break end
    index, stamp, count = i, t, tonumber(c)
  end
  if not index then return end
  local back = math.min(n, count)
  redis.call('LSET', L.rateLog, index, stamp .. ' ' .. (count - back))
  if tonumber(redis.call('GET', L.rateUsed) or '0') >= back then redis.call('DECRBY', L.rateUsed, back) end
end

-- The keys the rate window refused to wake now that it has room again (a run gave back what it
-- reserved and did not claim, which their timed waits cannot know of): one per `need` ids of room,
-- `need` being what a pass reserves (a slice, at most the limit's max). Taken off the list as they
-- are woken; one refused again goes back on it.
local function rateToWake(L, rateMax, need)
  if rateMax <= 0 then return {} end
  local room = rateMax - tonumber(redis.call('GET', L.rateUsed) or '0')
  if room <= 0 then return {} end
  local woken = redis.call('ZRANGE', L.rateWaiters, 0, math.ceil(room / math.max(1, math.min(need, rateMax))) - 1)
  if #woken > 0 then redis.call('ZREM', L.rateWaiters, unpack(woken)) end
  return woken
end

-- The waiters to wake now that places may have freed: as many as there are free places.
local function toWake(L, cap)
  local free = cap - redis.call('ZCARD', L.leases)
  if cap <= 0 or free <= 0 then return {} end
  return redis.call('ZRANGE', L.waiters, 0, free - 1)
end
