-- BullMQ's keys of a queue for one of its scripts: the queue's prefix followed by each of
-- `names` (BULLMQ_PUSH_ADD_KEYS, BULLMQ_FINISH_KEYS; '' stands for the job's id, `jobId`). Built once
-- per prefix and list, and kept: building 9 or 14 names on every call cost a push about 4.5 µs and
-- a completing claim about 3.9 µs (probes between sections; 1.7 and 1.2 µs with the copy). A call
-- gets a copy of its own, as BullMQ's script gets KEYS.
--- @include "keyspace"
local builtQueueKeys = {}
--- @memo builtQueueKeys (a queue's names are the same whichever call builds them)
local function queueKeys(prefix, names, jobId)
  local ofList = builtQueueKeys[names]
  if not ofList then
    ofList = {}
    builtQueueKeys[names] = ofList
  end
  local built = ofList[prefix]
  if not built then
    built = {}
    for i = 1, #names do
      built[i] = prefix .. names[i]
      if names[i] == '' then built.jobAt = i end
    end
    ofList[prefix] = built
  end
  local keys = {unpack(built)}
  if built.jobAt then keys[built.jobAt] = prefix .. jobId end
  return keys
end
