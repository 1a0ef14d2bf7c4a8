-- A key's BullMQ job holds one of two deduplication ids (keys.ts dedupIdsOf): its own, the
-- encoded key, or, while a job not ours holds that one (a job of the caller's own on a queue
-- shared with `processor(fallback)`), its spare, SPARE_DEDUP_PREFIX and the encoded key. A job
-- is ours when its name is JOB_NAME: the processor runs every job of that name as a key's job
-- and hands none to a fallback. A job not ours is never the key's job, and no add of ours goes
-- to it (BullMQ's deduplication would drop the add, or move that job if it is delayed).

-- Who holds a deduplication id whose key holds `jobId` (false when it holds none): 'ours',
-- 'foreign', or false when no job does (no id, or its job is gone: a stale id, which BullMQ's
-- add takes over). One HGET when there is a job.
local function dedupHolder(jobPrefix, jobId)
  if not jobId then return false end
  local name = redis.call('HGET', jobPrefix .. jobId, 'name')
  if not name then return false end
  return name == JOB_NAME and 'ours' or 'foreign'
end

-- The key's job, from the job ids its two deduplication keys hold (false when none): the id of
-- its job of ours that exists (nil when none does), and the id an add of its job goes under:
-- 'own' or 'spare', nil when jobs not ours hold both (nothing can be added until one of them
-- ends). A job of ours under the spare id is the key's job whatever holds the own id by then
-- (the job not ours may have ended: an add under the own id would make a second job of ours).
local function keyJobOf(jobPrefix, ownJobId, spareJobId)
  local spare = dedupHolder(jobPrefix, spareJobId)
  if spare == 'ours' then return spareJobId, 'spare' end
  local own = dedupHolder(jobPrefix, ownJobId)
  if own == 'ours' then return ownJobId, 'own' end
  if not own then return nil, 'own' end
  if not spare then return nil, 'spare' end
  return nil, nil
end

-- BullMQ's add arguments (its packed arguments, the job's data, its packed options), built for
-- the own id, made over for deduplication id `id`, whose key is `dedupKey`: the packed
-- arguments' 9th is the deduplication key, the options' `de.id` the id.
local function withDedupId(bullmqArgs, dedupKey, id)
  local args, opts = cmsgpack.unpack(bullmqArgs[1]), cmsgpack.unpack(bullmqArgs[3])
  args[9] = dedupKey
  opts['de']['id'] = id
  return {cmsgpack.pack(args), bullmqArgs[2], cmsgpack.pack(opts)}
end
