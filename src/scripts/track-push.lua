--[[
  Tracks the ids of one push under its ticket: appends the ticket to each id's tickets, in the
  same transaction as the push itself, and counts them in the ticket's total.

  KEYS[1] tracked ids waiting (hash: id -> tickets, space-separated)
  KEYS[2] the ticket's hash (total, done, failed)
  ARGV[1] ticket    ARGV[2] ms the ticket lives    ARGV[3..] ids

  Returns the ticket's total so far.
]]
for i = 3, #ARGV do
  local tickets = redis.call('HGET', KEYS[1], ARGV[i])
  redis.call('HSET', KEYS[1], ARGV[i], tickets and (tickets .. ' ' .. ARGV[1]) or ARGV[1])
end
local ttl = tonumber(ARGV[2])
-- The tracked ids live as long as their youngest ticket could.
if redis.call('PTTL', KEYS[1]) < ttl then redis.call('PEXPIRE', KEYS[1], ttl) end
local total = redis.call('HINCRBY', KEYS[2], 'total', #ARGV - 2)
redis.call('PEXPIRE', KEYS[2], ttl)
return total
