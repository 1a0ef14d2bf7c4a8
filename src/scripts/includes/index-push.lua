-- Records a push in the batcher's index of keys (for recovery), when the caller passes the index
-- (KEYS[INDEX]; left out on a Redis Cluster, where it lives in another slot). ARGV[1] is the
-- score (the push time, ms), ARGV[2] the member (the user's key).
local function indexPush(index)
  if KEYS[index] then redis.call('ZADD', KEYS[index], ARGV[1], ARGV[2]) end
end
