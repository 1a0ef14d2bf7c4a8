--[[
  BullMQ's moveToActive (the installed version's, inlined), and, when the job it fetches is a
  key job, that key's first claim in the same call (see includes/fused-claim.lua): the lock is
  taken, what a dead run left is recovered, and the first slice is claimed. Standalone Redis
  only (BullMQ's keys and the key's are in different slots on a Cluster); see engine/finisher.ts.

  KEYS    BullMQ's moveToActive keys, as its backend builds them
  ARGV[1] the batcher's store: 'list', 'set' or 'zset'
  ARGV[2] the batcher's root name (key bases are built from it, see keys.ts)
  ARGV[3] the lock value of the fetched key's run
  ARGV[4] how many ids its first claim takes
  ARGV[5] the lock's TTL in ms
  ARGV[6] '1': a single-lane run, whose claim releases the lock when it finds nothing
  ARGV[7] the rate limit's ids per window (0: none), ARGV[8] its window in ms
  ARGV[9..] BullMQ's moveToActive arguments

  Returns BullMQ's reply, with the first claim's reply (claim-key.lua's) as its fifth element
  when it fetched a key job.
]]
--- @include "bullmq-move-to-active"
--- @include "claim-keys"
--- @include "fused-claim"
local args = {}
for i = 9, #ARGV do args[#args + 1] = ARGV[i] end
local reply = bullmqMoveToActive(KEYS, args)
-- The claim's includes are top-level: a function library builds them once per server, so a
-- fetch that finds nothing pays nothing for them. (By EVALSHA, on Redis < 7, every fetch builds
-- them, a few µs: they used to be built here only when a job came, which cost a fetch with a job
-- about a quarter of its time under FCALL.)
claimFetched(reply, ARGV[2], firstClaimArgs(ARGV[1], ARGV[3], tonumber(ARGV[4]), ARGV[5], ARGV[6] == '1', tonumber(ARGV[7]), tonumber(ARGV[8])))
return reply
