-- Milliseconds by the Redis server's clock: every time we store or compare is on this one clock,
-- so pushers' and workers' clocks may differ.
local function clockMs()
  local time = redis.call('TIME')
  return tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
end
