-- Records the claim id (ARGV[2]) and its waitMs for as long as the lock (KEYS[3]) lives, so a
-- resent claim changes nothing and gets the same reply.
local lockTtl = redis.call('PTTL', KEYS[3])
if lockTtl > 0 then
  redis.call('SET', KEYS[4], ARGV[2] .. '|' .. result[2], 'PX', lockTtl)
else
  redis.call('SET', KEYS[4], ARGV[2] .. '|' .. result[2])
end
