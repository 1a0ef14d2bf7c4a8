--[[
  Releases a key's lock, if the caller still holds it, optionally acking the slice in flight.

  KEYS[1] lock    KEYS[2] in-flight ids    KEYS[3] id of the last claim applied
  ARGV[1] lock value
  ARGV[2] '1': the in-flight ids are done, drop them first; '0': leave them

  Returns 1: released
         -1: the lock is not held with this value (nothing changed)
]]
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return -1 end
if ARGV[2] == '1' then redis.call('DEL', KEYS[2]) end
redis.call('DEL', KEYS[1], KEYS[3])
return 1
