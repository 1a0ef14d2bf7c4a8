--[[
  A lane's pass through the batcher-wide limits before it claims (see engine/global-limits.ts):
  settles its previous reservation of the shared rate window, then asks, in this order, whether
  the batcher is held (`retryAfter` with scope 'batcher'), whether the window has room, and
  whether a place under the concurrency cap is free (or, for a lane that has one, whether it must
  give it up: to a lighter key that waits, or because the cap was lowered below the places held).
  Not fenced by a key's lock: its keys are the batcher's, in their own slot; a lease is the lane's
  own by its member (the run's lock value and the lane), which no other run has.

  KEYS    the batcher's limit names, in `limitKeys` order (see includes/global-limits.lua)
  ARGV    by name, generated from storage/scripts/args.ts (`limits-enter`):
    lease       the lane's lease member, `${lock}:${lane}`
    waiter      the run's job, `${queue}|${jobId}` (its entry among waiters while it waits)
    level       the job's level (its BullMQ priority; lighter is lower)
    cap         globalConcurrency (0: none)
    leaseTtlMs  how long a lease lasts unless renewed (the lock's TTL: a dead worker's lapses as its lock does)
    waitBoundMs the longest a refused job waits before it asks again, woken or not
    need        how many ids the lane would claim (a slice; also what a woken rate waiter is
                counted to reserve)
    rateMax, rateWindowMs  globalRateLimit (0: none)
    settleAt, settleCount  the lane's previous reservation: when it was made, and how many of its
                ids went unclaimed (negative: claimed beyond it); 0: none

  Returns {code, granted, waitMs, stamp, wake...}: code 'ok' (claim at most `granted` ids; the
  reservation's `stamp` settles it next time), 'held', 'rate' or 'full' (claim nothing: the job
  waits `waitMs`, and is woken sooner when a place frees, for 'full' (a lane above a lowered cap
  gives its place up this way), or when a run gives back ids of the window it reserved, for
  'rate'), or 'yield' (the lane gave its place to a lighter waiter). `wake`: waiters to wake now, places or room in the window having freed.
]]
--- @include "args-limits-enter"
--- @include "global-limits"
local A = limitsEnterArgs()
local L = limitNames()
local now = clockMs()
rateSettle(L, A.settleAt, A.settleCount, A.rateWindowMs)
dropLapsed(L, now)
local mine = A.cap > 0 and redis.call('ZSCORE', L.leases, A.lease)

-- The waiters to wake as this pass ends: `first`, then those the rate window has room for.
local function waking(first)
  for _, waiter in ipairs(rateToWake(L, A.rateMax, A.need)) do first[#first + 1] = waiter end
  return first
end

-- A refused lane claims nothing: it holds no place, and its job waits, on list `queue` (the
-- waiters for a place, or those for the rate window) when something frees one up.
local function refuse(code, waitMs, queue)
  local wake = {}
  if mine then
    redis.call('ZREM', L.leases, A.lease)
    wake = toWake(L, A.cap)
  end
  if queue then
    redis.call('ZADD', queue, 'NX', A.level * LEVEL + redis.call('INCR', L.waitSeq), A.waiter)
  end
  redis.call('ZADD', L.waitersSince, 'NX', now, A.waiter)
  redis.call('ZADD', L.waitersUntil, now + waitMs + A.waitBoundMs + A.leaseTtlMs, A.waiter)
  return {code, 0, waitMs, 0, unpack(waking(wake))}
end

local held = redis.call('PTTL', L.hold)
if held > 0 then return refuse('held', held) end

local allowance = A.need
if A.rateWindowMs > 0 then
  local wait
  allowance, wait = rateAllowance(L.rateLog, L.rateUsed, A.rateMax, A.rateWindowMs, math.min(A.need, A.rateMax))
  if allowance <= 0 then return refuse('rate', math.max(1, wait), L.rateWaiters) end
end

if A.cap > 0 then
  local running = redis.call('ZCARD', L.leases)
  if mine then
    -- The cap was lowered below the places held: this lane gives its own up and waits as any
    -- other key, so the new cap holds from each lane's next slice, not from each run's end.
    if running > A.cap then
      local first = redis.call('ZRANGE', L.leases, 0, 0, 'WITHSCORES')[2]
      local untilFree = first and tonumber(first) - now or A.waitBoundMs
      return refuse('full', math.max(1, math.min(A.waitBoundMs, untilFree)), L.waiters)
    end
    -- A lighter key waits and no place is free for it: this lane gives up its own.
    local best = redis.call('ZRANGE', L.waiters, 0, 0, 'WITHSCORES')
    if best[1] and running >= A.cap and math.floor(tonumber(best[2]) / LEVEL) < A.level then
      redis.call('ZREM', L.leases, A.lease)
      return {'yield', 0, 0, 0, unpack(waking({best[1]}))}
    end
  else
    -- Waiters ahead of this job (lighter, or as light and earlier) take free places first.
    local rank = redis.call('ZRANK', L.waiters, A.waiter)
    local ahead = rank or redis.call('ZCOUNT', L.waiters, '-inf', (A.level + 1) * LEVEL - 1)
    if running + ahead >= A.cap then
      local first = redis.call('ZRANGE', L.leases, 0, 0, 'WITHSCORES')[2]
      local untilFree = first and tonumber(first) - now or A.waitBoundMs
      return refuse('full', math.max(1, math.min(A.waitBoundMs, untilFree)), L.waiters)
    end
  end
  redis.call('ZADD', L.leases, now + A.leaseTtlMs, A.lease)
end

local granted = math.min(A.need, allowance)
if A.rateWindowMs > 0 then rateSpend(L.rateLog, L.rateUsed, granted, A.rateWindowMs) end
local since = redis.call('ZSCORE', L.waitersSince, A.waiter)
if since then
  redis.call('HINCRBY', L.counters, 'waitedMs', now - tonumber(since))
  redis.call('HINCRBY', L.counters, 'waits', 1)
  redis.call('ZREM', L.waitersSince, A.waiter)
  redis.call('ZREM', L.waiters, A.waiter)
  redis.call('ZREM', L.waitersUntil, A.waiter)
end
redis.call('ZREM', L.rateWaiters, A.waiter)
return {'ok', granted, 0, now, unpack(waking({}))}
