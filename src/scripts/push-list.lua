--[[
  Appends ids to a key's list (FIFO), atomically with what the pusher needs to know to skip
  adding a job: how many ids were pending, and whether the key's job exists.

  KEYS[1] pending list
  KEYS[2] the batcher's index of keys (optional; left out on a Redis Cluster)
  KEYS[3] BullMQ's deduplication key of the key's job (optional; left out on a Redis Cluster)
  ARGV[1] push time in ms (index score)    ARGV[2] the user's key (index member)
  ARGV[3..] ids

  Returns {ids pending before the push, the key's job id or false}
]]
--- @include "push-probed"
return pushProbed('LLEN', 'RPUSH')
