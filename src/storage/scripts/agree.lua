--[[
  A process's check of the batcher's recorded configuration (see storage/agreement.ts): records
  the store if none is yet, records the process's shard count with the time until which it may
  push to, or add jobs on, that count's queues without checking again (the latest any process
  asked for), and reads what every process must follow.

  KEYS[1] the batcher's config hash
  ARGV    by name, generated from storage/scripts/args.ts (`agree`):
    storeField, store  the store's field, and the process's store
    shardsField        the process's shard count's field
    validForMs         how long the process may go on without checking again (its recheck window
                       plus its push timeout): the count cannot be retired before then (see
                       forget-shard-count.lua)
    pausedAllField     the field that says every queue is paused (pauseAll)

  Returns { the recorded store, 1 if every queue is paused, else 0 }.
]]
--- @include "args-agree"
--- @include "clock"
local A = agreeArgs()
redis.call('HSETNX', KEYS[1], A.storeField, A.store)
local untilMs = clockMs() + A.validForMs
local recorded = tonumber(redis.call('HGET', KEYS[1], A.shardsField))
if not recorded or recorded < untilMs then redis.call('HSET', KEYS[1], A.shardsField, untilMs) end
return { redis.call('HGET', KEYS[1], A.storeField), redis.call('HEXISTS', KEYS[1], A.pausedAllField) }
