--[[
  Runs a page of reads in one call and returns their replies, in order. stats() reads a few
  counts of every indexed key; one call per page of keys costs the reading process (a worker
  that samples history, say) far less than a pipeline of thousands of commands, and Redis no
  more. Standalone Redis only: a page's keys live in many slots (see store/index.ts readKeys).

  KEYS every key the reads name, in order
  ARGV per read: its command (one of READS below), how many of the next KEYS it names, how
       many arguments follow, then those arguments

  Returns one reply per read (a missing value as nil).
]]
local READS = { LLEN = true, SCARD = true, ZCARD = true, LINDEX = true, GET = true, ZRANGE = true, HVALS = true, EXISTS = true }
local replies, k, i = {}, 1, 1
while i <= #ARGV do
  local command, nKeys, nArgs = ARGV[i], tonumber(ARGV[i + 1]), tonumber(ARGV[i + 2])
  if not READS[command] then return redis.error_reply('reads.lua runs reads only, not ' .. command) end
  local args = {}
  for j = k, k + nKeys - 1 do args[#args + 1] = KEYS[j] end
  for j = i + 3, i + 2 + nArgs do args[#args + 1] = ARGV[j] end
  k, i = k + nKeys, i + 3 + nArgs
  replies[#replies + 1] = redis.call(command, unpack(args))
end
return replies
