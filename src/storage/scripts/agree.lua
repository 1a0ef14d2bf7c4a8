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
    rateField, rateDefault  the batcher-wide rate limit's field, and the process's option ('':
                       none), recorded if the field is not there yet (see agreement.ts LIMIT_FIELDS)
    concurrencyField, concurrencyDefault  the same for the batcher-wide concurrency cap

  Returns { the recorded store, 1 if every queue is paused, else 0, the recorded rate limit,
  the recorded concurrency cap } (a limit false when none is recorded).
]]
--- @include "args-agree"
--- @include "clock"
local A = agreeArgs()
redis.call('HSETNX', KEYS[1], A.storeField, A.store)
local untilMs = clockMs() + A.validForMs
local recorded = tonumber(redis.call('HGET', KEYS[1], A.shardsField))
if not recorded or recorded < untilMs then redis.call('HSET', KEYS[1], A.shardsField, untilMs) end
if A.rateDefault ~= '' then redis.call('HSETNX', KEYS[1], A.rateField, A.rateDefault) end
if A.concurrencyDefault ~= '' then redis.call('HSETNX', KEYS[1], A.concurrencyField, A.concurrencyDefault) end
return {
  redis.call('HGET', KEYS[1], A.storeField), redis.call('HEXISTS', KEYS[1], A.pausedAllField),
  redis.call('HGET', KEYS[1], A.rateField), redis.call('HGET', KEYS[1], A.concurrencyField),
}
