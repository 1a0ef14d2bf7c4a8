import { DelayedError, type Job } from 'bullmq';
import type Redlock from 'redlock';
import { ShutdownError } from './errors';
import { aborted, maxRuntime } from './interrupt';
import { iterate, SliceFailure, type RunOutcome } from './iteration';
import { JOB_NAME } from './job';
import type { Keyspace, KeyNames } from './keys';
import { KeyLock } from './lock';
import { log } from './logger';
import { backoffDelay, type ResolvedOptions } from './options';
import { claim } from './store';
import { zsetReadyIn } from './store/zset';
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

/** A failure count outlives its last failure by this much, so a key that is never pushed again leaves no key behind. */
const FAILURES_TTL_MS = 7 * 24 * 3600_000;

/**
 * The BullMQ processor of a batcher. A run takes the key's lock, iterates slices, and then
 * completes (nothing left), or moves its own job to delayed: at once when interrupted (so it
 * lines up behind jobs already waiting), at the earliest ready time (zset), or after a backoff
 * when a slice failed. The job stays the same BullMQ job throughout, so a key never has two.
 * It fails (BullMQ's own attempts are 1) after `attempts` failed slices in a row, or when Redis
 * is too broken even to move it to delayed; the recovery sweep brings such a key back.
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

async function runKey(deps: ProcessorDeps, job: KeyJob, token: string, bullSignal: AbortSignal | undefined): Promise<void> {
  const { client, keyspace, options } = deps;
  const names = keyspace.forKey(job.data.key);
  let lock: KeyLock | undefined;
  let giveUp: { error: unknown } | undefined;
  try {
    const acquired = await KeyLock.acquire(deps.redlock, client, names.lock, options.lockTtlMs, options.logger);
    if (!acquired.held) {
      // Another run still holds the key (a stalled worker, or a crashed one until its TTL ends).
      return await requeue(job, token, acquired.retryInMs);
    }
    lock = acquired.lock;
    const outcome = await runSlices(deps, job, names, lock, bullSignal);
    // No renewal may race the release below (it would fail and log a spurious warning).
    lock.stop();
    giveUp = await conclude(deps, job, token, names, lock, outcome);
  } catch (err) {
    if (err instanceof DelayedError) throw err;
    // Redis trouble outside a slice. Failing the job would leave the key to the recovery sweep;
    // retrying it is better. The in-flight ids (if any) are restored by the next run.
    log(options.logger, 'warn', 'batch-by-key: run interrupted by an error; retrying the key', { err, key: job.data.key });
    if (lock) await release(client, names, lock.value, 'keep', options).catch(() => undefined);
    return await requeue(job, token, backoffDelay(options.backoff, 1, err));
  } finally {
    lock?.stop();
  }
  // Outside the try: this one is for BullMQ to record as the job's failure.
  if (giveUp) throw giveUp.error;
}

type Outcome = RunOutcome | { kind: 'failed'; error: unknown };

async function runSlices(deps: ProcessorDeps, job: KeyJob, names: KeyNames, lock: KeyLock, bullSignal: AbortSignal | undefined): Promise<Outcome> {
  const { options } = deps;
  const stopping = asShutdown(bullSignal);
  try {
    return await iterate({
      client: deps.client,
      store: options.store,
      names,
      lock,
      sliceSize: options.sliceSize,
      sliceTimeoutMs: options.sliceTimeoutMs,
      handler: deps.handler(),
      key: job.data.key,
      job,
      stop: AbortSignal.any([stopping, lock.signal]),
      interrupts: [aborted(lock.signal, 'lock_lost'), aborted(stopping, 'shutdown'), maxRuntime(Date.now(), options.maxRuntimeMs)],
    });
  } catch (thrown) {
    // Redis trouble in a claim is not the slice's fault: the safety net in runKey retries the run.
    if (!(thrown instanceof SliceFailure)) throw thrown;
    // A handler that gives up because ctx.signal fired for a shutdown or a lost lock is
    // stopping, not failing (a slice timeout is a failure).
    if (lock.signal.aborted) return { kind: 'lock_lost' };
    if (stopping.aborted) return { kind: 'stopped', reason: 'shutdown', restore: true };
    return { kind: 'failed', error: thrown.error };
  }
}

/** Commits what the run ended with, releases the key and moves the job on; says so when the key gives up. */
async function conclude(
  deps: ProcessorDeps,
  job: KeyJob,
  token: string,
  names: KeyNames,
  lock: KeyLock,
  outcome: Outcome,
): Promise<{ error: unknown } | undefined> {
  const { client, options } = deps;
  const key = job.data.key;
  switch (outcome.kind) {
    case 'drained':
      await release(client, names, lock.value, 'ack', options);
      return;
    case 'waiting':
      await release(client, names, lock.value, 'ack', options);
      return delayUntilReady(client, job, token, names, outcome.waitMs, options);
    case 'stopped':
      log(options.logger, 'debug', 'batch-by-key: interrupted, requeued behind waiting keys', { key, reason: outcome.reason });
      if (outcome.restore) await restoreSlice(deps, names, lock);
      await release(client, names, lock.value, outcome.restore ? 'keep' : 'ack', options);
      return requeue(job, token, 0);
    case 'lock_lost':
      log(options.logger, 'warn', 'batch-by-key: lost the key lock; the slice will be retried by the next run', { key });
      return requeue(job, token, 0);
    case 'failed':
      return retryLater(deps, job, token, names, lock, outcome.error);
  }
}

/** Puts the slice in flight back in front of the pending ids (a claim of nothing that restores). */
async function restoreSlice(deps: ProcessorDeps, names: KeyNames, lock: KeyLock): Promise<void> {
  await claim(deps.client, deps.options.store, names, lock.value, `${lock.value}:restore`, 'restore', 0);
}

/** Moves the job to delayed; with 0 it is promoted behind every job already waiting. */
async function requeue(job: KeyJob, token: string, delayMs: number): Promise<never> {
  await job.moveToDelayed(Date.now() + delayMs, token);
  throw new DelayedError();
}

/**
 * zset: waits for the earliest pending id. A push that landed after our last claim found the job
 * still active, so it could not bring the delayed job forward: look again once it is delayed.
 */
async function delayUntilReady(client: RedisClient, job: KeyJob, token: string, names: KeyNames, waitMs: number, options: ResolvedOptions): Promise<never> {
  await job.moveToDelayed(Date.now() + waitMs, token);
  try {
    const now = await zsetReadyIn(client, names);
    if (now >= 0 && now < waitMs) await job.changeDelay(now);
  } catch (err) {
    // The job is delayed already; at worst a push that raced with it waits for its earlier time.
    log(options.logger, 'warn', 'batch-by-key: could not re-check a delayed zset key', { err, key: job.data.key });
  }
  throw new DelayedError();
}

async function release(client: RedisClient, names: KeyNames, lockValue: string, mode: 'ack' | 'keep' | 'fail', options: ResolvedOptions): Promise<number> {
  const status = Number(
    await runScript(client, 'release', [names.lock, names.inFlight, names.lastClaim, names.failures], [lockValue, mode, FAILURES_TTL_MS]),
  );
  if (status === ScriptStatus.LockNotHeld) {
    log(options.logger, 'warn', 'batch-by-key: the key lock expired before release; in-flight ids will be retried', { lock: names.lock });
  }
  return status;
}

/**
 * Puts the failed slice back in front, counts the failure in Redis (per key, so it survives
 * the job being re-created), and backs off; after `attempts` failures in a row the job fails
 * and the ids stay pending.
 */
async function retryLater(deps: ProcessorDeps, job: KeyJob, token: string, names: KeyNames, lock: KeyLock, err: unknown): Promise<{ error: unknown }> {
  const { client, options } = deps;
  await restoreSlice(deps, names, lock);
  const failures = await release(client, names, lock.value, 'fail', options);
  // The lock was lost meanwhile: nothing was counted, and the next holder restores the slice.
  if (failures === ScriptStatus.LockNotHeld) return requeue(job, token, 0);
  log(options.logger, 'error', 'batch-by-key: slice failed', { err, key: job.data.key, failures, attempts: options.attempts });
  if (failures >= options.attempts) return { error: err };
  const delayMs = backoffDelay(options.backoff, Math.max(failures, 1), err);
  // zset pushes reschedule the job to their ready time; this marker keeps them from cutting the backoff short.
  if (options.store === 'zset' && delayMs > 0) await client.set(names.backoff, '1', 'PX', delayMs);
  return requeue(job, token, delayMs);
}

/** BullMQ aborts a job's signal with whatever reason was given to cancelJob; ours is always a ShutdownError. */
function asShutdown(bullSignal: AbortSignal | undefined): AbortSignal {
  const controller = new AbortController();
  const relay = () => controller.abort(new ShutdownError(`the worker is closing or cancelled the job: ${String(bullSignal?.reason)}`));
  if (bullSignal?.aborted) relay();
  else bullSignal?.addEventListener('abort', relay, { once: true });
  return controller.signal;
}
