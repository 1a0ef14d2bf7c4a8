--[[
  A process's check of the batcher's recorded configuration (see storage/agreement.ts): records
  the store if none is yet, records the process's shard count with the time until which it may
  push to, or add jobs on, that count's queues without checking again (the latest any process
  asked for), and reads what every process must follow.

  KEYS[1] the batcher's config hash
  ARGV[1] the store's field            ARGV[2] the process's store
  ARGV[3] the process's shard count's field
  ARGV[4] how long, ms, the process may go on without checking again (its recheck window plus
          its push timeout): the count cannot be retired before then (see forget-shard-count.lua)
  ARGV[5] the field that says every queue is paused (pauseAll)

  Returns { the recorded store, 1 if every queue is paused, else 0 }.
]]
--- @include "clock"
redis.call('HSETNX', KEYS[1], ARGV[1], ARGV[2])
local untilMs = clockMs() + tonumber(ARGV[4])
local recorded = tonumber(redis.call('HGET', KEYS[1], ARGV[3]))
if not recorded or recorded < untilMs then redis.call('HSET', KEYS[1], ARGV[3], untilMs) end
return { redis.call('HGET', KEYS[1], ARGV[1]), redis.call('HEXISTS', KEYS[1], ARGV[5]) }
