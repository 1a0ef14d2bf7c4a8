-- Milliseconds by the Redis server's clock: every time we store or compare is on this one clock,
-- so pushers' and workers' clocks may differ. Read once per script call, and only if needed (a
-- library of functions resets it at the start of each call: see `@per-call` in scripts/index.ts).
local clockNow
--- @per-call clockNow = nil
local function clockMs()
  if not clockNow then
    local time = redis.call('TIME')
    clockNow = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
  end
  return clockNow
end
