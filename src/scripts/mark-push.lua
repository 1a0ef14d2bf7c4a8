--[[
  Records when a push landed, for lag, in the push's own transaction (the key's hash slot).
  Run once per push, after its ids, by the Redis server's clock (the one lag is read against).

  KEYS[1] push marks of the key
  ARGV[1] 'list': append `pushMs count` (one mark per push, consumed by claims in FIFO order)
          'set':  set the time unless pending was already non-empty (cleared when a claim empties it)
  ARGV[2] ids pushed
]]
--- @include "clock"
local now = clockMs()
if ARGV[1] == 'list' then
  redis.call('RPUSH', KEYS[1], now .. ' ' .. ARGV[2])
else
  redis.call('SET', KEYS[1], now, 'NX')
end
return now
