import { InvalidOptionError } from '../core/errors';
import { onlyKnownOptions, optionNames } from '../core/validate';
import { validateWorkerConnection } from '../options';
import type { CreateWorkerOptions } from '../core/types';

/**
 * BullMQ's WorkerOptions as createWorker takes them (its prefix is the batcher's): the compiler
 * holds this list to BullMQ's type, so a BullMQ upgrade that adds an option fails the build here.
 */
const WORKER_OPTIONS = optionNames<CreateWorkerOptions>()([
  'autorun',
  'blockingConnection',
  'concurrency',
  'connection',
  'drainDelay',
  'limiter',
  'lockDuration',
  'lockRenewTime',
  'maxStalledCount',
  'maxStartedAttempts',
  'maximumRateLimitDelay',
  'metrics',
  'name',
  'removeOnComplete',
  'removeOnFail',
  'runRetryDelay',
  'settings',
  'skipLockRenewal',
  'skipStalledCheck',
  'skipVersionCheck',
  'skipWaitingForReady',
  'stalledInterval',
  'telemetry',
  'useWorkerThreads',
  'workerForkOptions',
  'workerThreadsOptions',
]);

/**
 * BullMQ worker options that fight a key job's life, refused with why; every other one of
 * WORKER_OPTIONS passes through to BullMQ as it is (docs/api.md, "createWorker(options)").
 */
const SANDBOX = "createWorker runs the batcher's processor in this process; BullMQ's sandbox is for a processor file";
const REFUSED_WORKER_OPTIONS: Partial<Record<keyof CreateWorkerOptions, string>> = {
  limiter:
    "BullMQ's limiter counts jobs, and a key's job carries many ids, so it would limit key runs, not ids: use the batcher's " +
    'rateLimit: { max, durationMs } (ids per key per window)',
  maxStartedAttempts:
    "a key's job starts again each time its run yields (its budget spent, or its turn given to another key), so BullMQ would " +
    "fail it at a later start and leave its ids to the recovery sweep: a slice's retries are the batcher's attempts and backoff",
  skipStalledCheck: "BullMQ's stalled check is how the keys of a worker that died (SIGKILL, out of memory) get their jobs back",
  skipLockRenewal: "a key's job runs up to maxRuntimeMs; without renewing its BullMQ lock, BullMQ takes it for stalled while it runs",
  useWorkerThreads: SANDBOX,
  workerForkOptions: SANDBOX,
  workerThreadsOptions: SANDBOX,
};

/** Throws for a refused BullMQ worker option that is on (see REFUSED_WORKER_OPTIONS); `where` names the options. */
export function refuseWorkerOptions(where: string, options: object): void {
  for (const [name, why] of Object.entries(REFUSED_WORKER_OPTIONS)) {
    const value: unknown = (options as Record<string, unknown>)[name];
    if (value !== undefined && value !== false) throw new InvalidOptionError(`${where}: ${name} is not supported: ${why}`);
  }
}

/** Throws for an unknown, refused or misplaced createWorker option; `where` names the options in the message. */
export function checkCreateWorkerOptions(workerOptions: CreateWorkerOptions, where: string, prefix: string): void {
  if (typeof workerOptions === 'object' && workerOptions !== null) {
    onlyKnownOptions(where, workerOptions, WORKER_OPTIONS);
    refuseWorkerOptions(where, workerOptions);
  }
  validateWorkerConnection(workerOptions.connection, prefix);
}

/**
 * A follower's own BullMQ concurrency (see shard-worker.ts): above any budget, so that the shared
 * budget, not the follower, decides how many of its jobs run.
 */
export const FOLLOWER_CONCURRENCY = 100_000;
