-- The body of push-list and push-set: ids from ARGV[3] on go into KEYS[1] with `add`, in commands
-- of at most 1000. Returns {ids pending before the push, the key's BullMQ job id or false}; the
-- job id is read from KEYS[3] (BullMQ's deduplication key) when the caller passes it.
--- @include "index-push"
local function pushProbed(countCommand, addCommand)
  indexPush(2)
  local before = redis.call(countCommand, KEYS[1])
  for i = 3, #ARGV, 1000 do
    redis.call(addCommand, KEYS[1], unpack(ARGV, i, math.min(i + 999, #ARGV)))
  end
  local jobId = false
  if KEYS[3] then jobId = redis.call('GET', KEYS[3]) end
  return {before, jobId}
end
