--[[
  Redlock's acquire, made safe to resend: taking a lock we already hold with this value succeeds.
  (ioredis resends a command whose reply was lost to a dropped connection; redlock's own script
  would then see its own lock and fail.) Passed to redlock as its acquireScript.

  KEYS[1..n] lock keys
  ARGV[1] lock value
  ARGV[2] TTL in ms

  Returns the number of keys locked (#KEYS), or 0 when a key is held with another value.
]]
for _, key in ipairs(KEYS) do
  local current = redis.call('GET', key)
  if current and current ~= ARGV[1] then return 0 end
end
for _, key in ipairs(KEYS) do
  redis.call('SET', key, ARGV[1], 'PX', ARGV[2])
end
return #KEYS
