-- A key job's entries in BullMQ's event stream (`…:events`: added, waiting, active, completed)
-- are not written: nothing of ours reads them (a worker's events, tickets and metrics cover a
-- key's job), and they cost a key cycle 4 XADDs and an XTRIM. A job not ours, on a queue shared
-- with `processor(fallback)`, keeps every one. The calls that run BullMQ's scripts hold those
-- writes (bullmq/scripts.ts bullmqEventsInclude) and release them with one of these.
--- @include "keyspace"
--- @include "bullmq-events"
--- @include "bullmq-job"

-- Keeps the events of jobs not ours: `known` maps the ids of the jobs this call knows to whether
-- they are ours; any other job's name is read (bullmqJobName).
local function keepNotOurs(known)
  return function(prefix, jobId)
    local ours = known[jobId]
    if ours == nil then ours = bullmqJobName(prefix, jobId) == JOB_NAME end
    return not ours
  end
end

-- For an add of ours, which touches no job but the key's.
local function keepNone() return false end
