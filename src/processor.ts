import { DelayedError, type Job } from 'bullmq';
import type Redlock from 'redlock';
import { ShutdownError } from './errors';
import { aborted, maxRuntime } from './interrupt';
import { JOB_NAME } from './job';
import { iterate, type RunOutcome } from './iteration';
import type { Keyspace, KeyNames } from './keys';
import { KeyLock } from './lock';
import { log } from './logger';
import { backoffDelay, type ResolvedOptions } from './options';
import { claim } from './store';
import { runScript, ScriptStatus, type RedisClient } from './scripts';
import type { EachIteration, FallbackProcessor, KeyJob, KeyProcessor } from './types';

/** @internal */
export interface ProcessorDeps {
  client: RedisClient;
  redlock: Redlock;
  keyspace: Keyspace;
  options: ResolvedOptions;
  handler: () => EachIteration;
}


/**
 * The BullMQ processor of a batcher. A run takes the key's lock, iterates slices, and then
 * completes (nothing left), or moves its own job to delayed: at once when interrupted (so it
 * lines up behind jobs already waiting), at the earliest ready time (zset), or after a backoff
 * when a slice failed. The job stays the same BullMQ job throughout, so a key never has two.
 */
export function keyProcessor(deps: ProcessorDeps, fallback?: FallbackProcessor): KeyProcessor {
  // Three declared parameters: BullMQ hands a cancellation signal only to processors of arity >= 3.
  return async function processKeyJob(job, token, signal): Promise<void> {
    if (job.name !== JOB_NAME) {
      if (fallback) {
        await fallback(job as unknown as Job<unknown, unknown, string>, token, signal);
        return;
      }
      throw new Error(`batch-by-key: no processor for job name ${JSON.stringify(job.name)}`);
    }
    await runKey(deps, job, token ?? '', signal);
  };
}

async function runKey(deps: ProcessorDeps, job: KeyJob, token: string, shutdown: AbortSignal | undefined): Promise<void> {
  const { client, keyspace, options } = deps;
  const key = job.data.key;
  const names = keyspace.forKey(key);

  const acquired = await KeyLock.acquire(deps.redlock, client, names.lock, options.lockTtlMs, options.logger);
  if (!acquired.held) {
    // Another run still holds the key (a stalled worker, or a crashed one until its TTL ends).
    return requeue(job, token, acquired.retryInMs);
  }
  const lock = acquired.lock;
  const stopping = asShutdown(shutdown);

  const signal = AbortSignal.any([stopping, lock.signal]);
  let outcome: RunOutcome;
  try {
    outcome = await iterate({
      client,
      store: options.store,
      names,
      lock,
      sliceSize: options.sliceSize,
      handler: deps.handler(),
      ctx: { key, job, signal },
      interrupts: [aborted(lock.signal, 'lock_lost'), aborted(stopping, 'shutdown'), maxRuntime(Date.now(), options.maxRuntimeMs)],
      onFirstSuccess: job.data.failures ? () => job.updateData({ key }) : undefined,
    });
  } catch (err) {
    lock.stop();
    await giveBack(client, options.store, names, lock.value, deps.options);
    // A handler that gives up because ctx.signal fired is stopping, not failing.
    if (signal.aborted) return requeue(job, token, 0);
    return retryLater(deps.options, job, token, err);
  }
  lock.stop();

  switch (outcome.kind) {
    case 'drained':
      await release(client, names, lock.value, false, options);
      return;
    case 'waiting':
      await release(client, names, lock.value, false, options);
      return requeue(job, token, outcome.waitMs);
    case 'stopped':
      log(options.logger, 'debug', 'batch-by-key: interrupted, requeued behind waiting keys', { key, reason: outcome.reason });
      await release(client, names, lock.value, true, options);
      return requeue(job, token, 0);
    case 'lock_lost':
      log(options.logger, 'warn', 'batch-by-key: lost the key lock; the slice will be retried by the next run', { key });
      return requeue(job, token, 0);
  }
}

/** BullMQ aborts a job's signal with whatever reason was given to cancelJob; ours is always a ShutdownError. */
function asShutdown(bullSignal: AbortSignal | undefined): AbortSignal {
  const controller = new AbortController();
  const relay = () => controller.abort(new ShutdownError(`the worker is closing or cancelled the job: ${String(bullSignal?.reason)}`));
  if (bullSignal?.aborted) relay();
  else bullSignal?.addEventListener('abort', relay, { once: true });
  return controller.signal;
}

/** Moves the job to delayed; with 0 it is promoted behind every job already waiting. */
async function requeue(job: KeyJob, token: string, delayMs: number): Promise<never> {
  await job.moveToDelayed(Date.now() + delayMs, token);
  throw new DelayedError();
}

async function release(client: RedisClient, names: KeyNames, lockValue: string, ack: boolean, options: ResolvedOptions): Promise<void> {
  const status = await runScript(client, 'release', [names.lock, names.inFlight, names.lastClaim], [lockValue, ack ? '1' : '0']);
  if (status !== ScriptStatus.Ok) {
    log(options.logger, 'warn', 'batch-by-key: the key lock expired before release; in-flight ids will be retried', { lock: names.lock });
  }
}

/** Puts the failed slice back in front and unlocks, best effort: if Redis is down, the next run recovers both. */
async function giveBack(client: RedisClient, store: ResolvedOptions['store'], names: KeyNames, lockValue: string, options: ResolvedOptions): Promise<void> {
  try {
    await claim(client, store, names, lockValue, `${lockValue}:restore`, 'restore', 0);
    await release(client, names, lockValue, false, options);
  } catch (err) {
    log(options.logger, 'error', 'batch-by-key: could not give back a failed slice; it is recovered when the lock expires', { err, lock: names.lock });
  }
}

/** Backs off and runs the key again, until `attempts` failures in a row; then the job fails and the ids stay pending. */
async function retryLater(options: ResolvedOptions, job: KeyJob, token: string, err: unknown): Promise<never> {
  const failures = (job.data.failures ?? 0) + 1;
  log(options.logger, 'error', 'batch-by-key: slice failed', { err, key: job.data.key, failures, attempts: options.attempts });
  if (failures >= options.attempts) throw err;
  await job.updateData({ key: job.data.key, failures });
  return requeue(job, token, backoffDelay(options.backoff, failures, err));
}
