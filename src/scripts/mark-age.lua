--[[
  How long ago the slice in flight's mark was set (its oldest id's push, see
  includes/claim-body.lua), by the Redis clock: push-to-processed latency, read as the slice ends.

  KEYS[1] mark of the slice in flight
  Returns ms, or -1 without a mark.
]]
local mark = redis.call('GET', KEYS[1])
if not mark then return -1 end
local time = redis.call('TIME')
return tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000) - tonumber(mark)
