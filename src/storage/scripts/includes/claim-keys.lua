-- A claim's keys and arguments by name: K, the key's names, and A, the claim's arguments (see
-- claim.lua's header for what each is). Declared before the stores and the claim, which read
-- them; a script sets them for each key it claims for: its own, or the key of a job it fetched
-- (see fused-claim.lua). The names come from the key's base alone (`keyNames`, generated from
-- storage/keys.ts), never from KEYS by position.
--- @include "keyspace"
local K, A
--- @per-call K, A = nil, nil

-- The arguments of claim.lua, from ARGV[1..13].
local function claimArgs()
  return {
    store = ARGV[1], lock = ARGV[2], claimId = ARGV[3], settle = ARGV[4], count = tonumber(ARGV[5]),
    lane = tonumber(ARGV[6]), lockTtlMs = ARGV[7], takeLock = ARGV[8] == '1', releaseIfEmpty = ARGV[9] == '1',
    rateMax = tonumber(ARGV[10]), rateWindowMs = tonumber(ARGV[11]), holdMs = tonumber(ARGV[12]),
    finishKeys = tonumber(ARGV[13]),
  }
end

-- The arguments of a run's first claim made by a fetch (see fused-claim.lua): it takes the lock
-- with `lock`, recovers what a dead run left in flight, and claims the first slice, as
-- engine/processor.ts's own first claim does; `once`: it is never resent, so its claim id need
-- not be remembered.
local function firstClaimArgs(store, lock, count, lockTtlMs, releaseIfEmpty, rateMax, rateWindowMs)
  return {
    store = store, lock = lock, claimId = lock .. ':0:1', settle = 'recover', count = count, lane = 0,
    lockTtlMs = lockTtlMs, takeLock = true, releaseIfEmpty = releaseIfEmpty, rateMax = rateMax,
    rateWindowMs = rateWindowMs, holdMs = 0, finishKeys = 0, once = true,
  }
end
