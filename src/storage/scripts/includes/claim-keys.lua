-- The claim scripts' keys and arguments by name (see claim-body.lua for what each is), read once
-- at the top of every claim script so that its store functions and its body never count KEYS.
local K = {
  pending = KEYS[1], inFlight = KEYS[2], lock = KEYS[3], lastClaim = KEYS[4],
  retry = KEYS[5], retrySlices = KEYS[6], tracked = KEYS[7], trackedInFlight = KEYS[8],
  ticketPrefix = KEYS[9], pushMarks = KEYS[10], inFlightMark = KEYS[11], inFlightSlice = KEYS[12],
  paused = KEYS[13], hold = KEYS[14], rateLog = KEYS[15], payloads = KEYS[16],
  payloadsInFlight = KEYS[17], settledTickets = KEYS[18], rateUsed = KEYS[19],
}
local A = {
  lock = ARGV[1], claimId = ARGV[2], settle = ARGV[3], count = tonumber(ARGV[4]),
  maxRetrying = tonumber(ARGV[5]), otherLanes = tonumber(ARGV[6]), lockTtlMs = ARGV[7],
  takeLock = ARGV[8] == '1', releaseIfEmpty = ARGV[9] == '1', rateMax = tonumber(ARGV[10]),
  rateWindowMs = tonumber(ARGV[11]), holdMs = tonumber(ARGV[12]), finishKeys = tonumber(ARGV[13]),
}
-- BullMQ's keys and arguments to complete the run's job follow ours (see finish-job.lua).
local OWN_KEYS, OWN_ARGS = 19, 13
