/**
 * The one door to BullMQ: no module of ours outside this folder imports `bullmq` (eslint
 * enforces it). What BullMQ documents passes through as it is; what it does not (its script
 * sources, its backend, its job add, a worker's private fields) sits behind a named function
 * here, each saying which BullMQ source it mirrors. See README.md.
 */
export { DelayedError, Job, Queue, UnrecoverableError, Worker } from 'bullmq';
export type { ConnectionOptions, JobsOptions, Processor, WorkerOptions } from 'bullmq';
export { splitCall, type BullmqCall, type SentArg } from './calls';
export { bullmqEventsInclude, bullmqScript, type BullmqScript } from './scripts';
export { redisBackend, type BackendFactory, type QueueBaseOptions, type RedisQueueBackend } from './backend';
export { captureAdd, jobKey, prefixNaming, PUSH_ADD_KEYS, queuePrefix, type PushAddKind } from './job-add';
export {
  addKeysDerivable,
  BULLMQ_FINISH_KEYS,
  BULLMQ_JOB_FIELDS,
  BULLMQ_JOB_LISTS,
  fetchReplyOf,
  queueListsOf,
  queueLoadKeys,
  type QueueLists,
} from './layout';
export { bullmqDefinitions, bullmqInclude, BULLMQ_INCLUDES, INLINED_FROM, INLINED_TO } from './lua';
export { processorWithoutSignal, processorWithSignal } from './processor';
export { aroundCancels, aroundClose, blockingClientOf, fetchBeforeBlocking, markNotDrained, ownClientsOf } from './worker';
export { derivable, fetchKeyCount, FinishCalls, fusedBackendProblem, fusedScriptsProblem, routeFetches } from './fused-path';
export { HookedWorker } from './worker-hooks';
