--[[
  Forgets a recorded shard count (see storage/agreement.ts), unless a process that recorded it may
  still push to its queues without checking again: then it changes nothing. In one call, so that a
  process checking at the same moment either finds the count forgotten (and records it again) or
  keeps it recorded.

  KEYS[1] the batcher's config hash
  ARGV[1] the count's field (its value: until when, by the Redis clock, a process may use it unseen)

  Returns 0 when the count was forgotten, else the ms left until it may be.
]]
--- @include "clock"
local untilMs = tonumber(redis.call('HGET', KEYS[1], ARGV[1]))
if untilMs then
  local left = untilMs - clockMs()
  if left > 0 then return left end
end
redis.call('HDEL', KEYS[1], ARGV[1])
return 0
