--[[
  The batcher-wide limits changed, as a worker heard it (see engine/global-limits.ts): returns
  every key job waiting for a limit, to be woken and to ask again under the new limits, and
  forgets the waiters of a limit now off. Those jobs run unlimited once woken and never pass
  limits-enter.lua again, so their entries would stay until they lapse (a lock TTL past their
  last wait), and count as waiters ahead of every new key once the limit is back.

  KEYS    the batcher's limit names, in `limitKeys` order (see includes/global-limits.lua)
  ARGV[1] globalConcurrency now (0: none): with none, the waiters for a place are forgotten
  ARGV[2] globalRateLimit's max now (0: none): with none, the waiters for the window are forgotten

  Returns the waiters (`${queue}|${jobId}`), those for a place first, each once.
]]
--- @include "global-limits"
local L = limitNames()
local cap, rateMax = tonumber(ARGV[1]), tonumber(ARGV[2])
local forPlace = redis.call('ZRANGE', L.waiters, 0, -1)
local forRate = redis.call('ZRANGE', L.rateWaiters, 0, -1)

-- Forgets the waiters of list `list` unless they also wait on `other`, a list still in force.
local function forget(list, members, other, otherInForce)
  if #members == 0 then return end
  redis.call('DEL', list)
  for _, member in ipairs(members) do
    if not (otherInForce and redis.call('ZSCORE', other, member)) then
      redis.call('ZREM', L.waitersSince, member)
      redis.call('ZREM', L.waitersUntil, member)
    end
  end
end
if cap <= 0 then forget(L.waiters, forPlace, L.rateWaiters, rateMax > 0) end
if rateMax <= 0 then forget(L.rateWaiters, forRate, L.waiters, cap > 0) end

local all, seen = {}, {}
for _, list in ipairs({forPlace, forRate}) do
  for _, member in ipairs(list) do
    if not seen[member] then
      seen[member] = true
      all[#all + 1] = member
    end
  end
end
return all
