--[[
  Releases a key's lock, if the caller still holds it.

  KEYS[1] lock    KEYS[2] in-flight ids    KEYS[3] id of the last claim applied
  KEYS[4] failures in a row
  ARGV[1] lock value
  ARGV[2] 'ack':  the in-flight slice succeeded: drop it and the failure count
          'keep': leave the in-flight ids for the next run to restore
          'fail': the slice failed (already restored): count one more failure
  ARGV[3] with 'fail': ms the failure count is kept without a new failure

  Returns 1: released ('ack', 'keep'), or the failures in a row ('fail')
         -1: the lock is not held with this value (nothing changed)
]]
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return -1 end
redis.call('DEL', KEYS[1], KEYS[3])
if ARGV[2] == 'ack' then
  redis.call('DEL', KEYS[2], KEYS[4])
elseif ARGV[2] == 'fail' then
  local failures = redis.call('INCR', KEYS[4])
  redis.call('PEXPIRE', KEYS[4], ARGV[3])
  return failures
end
return 1
