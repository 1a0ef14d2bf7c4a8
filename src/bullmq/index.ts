/**
 * The one door to BullMQ: no module of ours outside this folder imports `bullmq` (eslint
 * enforces it). What BullMQ documents passes through as it is; what it does not (its script
 * sources, its backend, its job add, a worker's private fields) sits behind a named function
 * here, each saying which BullMQ source it mirrors. See README.md.
 */
export { DelayedError, Job, Queue, UnrecoverableError, Worker } from 'bullmq';
export type { ConnectionOptions, JobsOptions, Processor, WorkerOptions } from 'bullmq';
export { bullmqEventsInclude, bullmqScript, withHeldEvents, type BullmqScript } from './scripts';
export {
  answerCompletions,
  backendProblem,
  completionCall,
  nextJobData,
  redisBackend,
  routeCommands,
  type BackendFactory,
  type Completion,
  type QueueBaseOptions,
  type RedisQueueBackend,
} from './backend';
export {
  captureAdd,
  jobLists,
  prefixNaming,
  PUSH_ADD_KEYS,
  queuePrefix,
  type AddKind,
  type CapturedAdd,
  type PushAddKind,
} from './job-add';
export {
  addKeysDerivable,
  BULLMQ_CHANGE_DELAY_KEYS,
  BULLMQ_DEFERRED_FAILURE,
  BULLMQ_FETCH_REPLY,
  BULLMQ_FINISH_ARGS,
  BULLMQ_FINISH_KEYS,
  BULLMQ_JOB_FIELDS,
  BULLMQ_JOB_LISTS,
  BULLMQ_SCORES,
  fetchReplyOf,
  queueListsOf,
  queueLoadKeys,
  type QueueLists,
} from './layout';
export { bullmqDefinitions, bullmqInclude, BULLMQ_INCLUDES, INLINED_FROM, INLINED_TO } from './lua';
export { processorWithoutSignal, processorWithSignal } from './processor';
export { aroundCancels, aroundClose, blockingClientOf, fetchBeforeBlocking, markNotDrained, ownClientsOf } from './worker';
export {
  appendedToFetch,
  derivable,
  fetchKeyCount,
  FinishCalls,
  fusedBackendProblem,
  fusedScriptsProblem,
  routeFetches,
  type SplitCall,
} from './fused-path';
export { HookedWorker } from './worker-hooks';
