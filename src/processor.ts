import { DelayedError, type Job } from 'bullmq';
import type Redlock from 'redlock';
import type { DeadLetterBox } from './dead-letters';
import { ShutdownError } from './errors';
import type { BatcherEmitter } from './events';
import { mayRetry, planFailure, serializeError } from './failures';
import { aborted, maxRuntime } from './interrupt';
import { iterate, type FailedSlice, type RunOutcome } from './iteration';
import { JOB_NAME } from './job';
import type { Keyspace, KeyNames } from './keys';
import { KeyLock } from './lock';
import { log } from './logger';
import { backoffDelay, type ResolvedOptions } from './options';
import { claim, dueIn } from './store';
import { MAX_TICKET_ERRORS } from './progress';
import { budgetOf, demote, preemption, type QueueLists } from './scheduling';
import { runScript, ScriptStatus, type RedisClient } from './scripts';
import type { EachIteration, FallbackProcessor, KeyJob, KeyProcessor } from './types';

/** @internal */
export interface ProcessorDeps {
  client: RedisClient;
  redlock: Redlock;
  keyspace: Keyspace;
  options: ResolvedOptions;
  handler: () => EachIteration;
  deadLetters: DeadLetterBox;
  events: BatcherEmitter;
  /** BullMQ's wait and active lists of the batcher's queue (fair scheduling reads them). */
  queueLists: () => QueueLists;
}

/**
 * The BullMQ processor of a batcher. A run takes the key's lock, iterates slices, and then
 * completes (nothing left), or moves its own job to delayed: at once when interrupted (so it
 * lines up behind jobs already waiting), or until something is due (a zset time, a failed
 * slice's backoff). The job stays the same BullMQ job throughout, so a key never has two.
 * A failed slice never fails the job (see failures.ts); the job fails (BullMQ's own attempts
 * are 1) only when Redis is too broken even to move it to delayed, and the recovery sweep
 * brings such a key back.
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
    await conclude(deps, job, token, names, lock, outcome);
  } catch (err) {
    if (err instanceof DelayedError) throw err;
    // Redis trouble outside a slice. Failing the job would leave the key to the recovery sweep;
    // retrying it is better. The in-flight ids (if any) are recovered by the next run.
    log(options.logger, 'warn', 'batch-by-key: run interrupted by an error; retrying the key', { err, key: job.data.key });
    if (lock) await release(client, names, lock.value, 'keep', options).catch(() => undefined);
    return await requeue(job, token, backoffDelay(options.backoff, 1, err));
  } finally {
    lock?.stop();
  }
}

async function runSlices(deps: ProcessorDeps, job: KeyJob, names: KeyNames, lock: KeyLock, bullSignal: AbortSignal | undefined): Promise<RunOutcome> {
  const { options } = deps;
  const stopping = asShutdown(bullSignal);
  return iterate({
    client: deps.client,
    store: options.store,
    names,
    lock,
    sliceSize: options.sliceSize,
    concurrency: options.concurrencyPerKey,
    sliceTimeoutMs: options.sliceTimeoutMs,
    handler: deps.handler(),
    around: options.around,
    events: deps.events,
    key: job.data.key,
    job,
    stop: AbortSignal.any([stopping, lock.signal]),
    interrupts: [
      aborted(lock.signal, 'lock_lost'),
      aborted(stopping, 'shutdown'),
      maxRuntime(Date.now(), budgetOf(job.data.key, options.maxRuntimeMs, options.weight, options.logger)),
      ...(options.scheduling === 'fair'
        ? [preemption(deps.client, deps.queueLists(), options.logger, { level: Number(job.priority ?? 0), startedAt: Date.now() })]
        : []),
    ],
    settleFailure: (failed) => settleFailure(deps, lock, failed),
    mayRunAgain: (slice) => mayRetry(slice.attempts, slice.isolating, options),
  });
}

/** Commits what the run ended with, releases the key and moves the job on. */
async function conclude(deps: ProcessorDeps, job: KeyJob, token: string, names: KeyNames, lock: KeyLock, outcome: RunOutcome): Promise<void> {
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
      deps.events.emit('interrupted', { key, job, reason: outcome.reason });
      if (outcome.restore) await restoreSlice(deps, names, lock);
      await release(client, names, lock.value, outcome.restore ? 'keep' : 'ack', options);
      // A key that had its turn goes behind keys that have not (a shutdown or a timeout is no turn).
      if (options.scheduling === 'fair' && (outcome.reason === 'max_runtime' || outcome.reason === 'preempted')) await demote(job);
      return requeue(job, token, 0);
    case 'lock_lost':
      log(options.logger, 'warn', 'batch-by-key: lost the key lock; the slice will be retried by the next run', { key });
      deps.events.emit('interrupted', { key, job, reason: 'lock_lost' });
      return requeue(job, token, 0);
  }
}

/**
 * Settles a failed slice by its plan: dead letters first (in the batcher's slot), then, fenced
 * by the lock in the key's slot, the parts to retry and the in-flight ids dropped. A crash in
 * between leaves the ids in flight as well as dead: they run again (at least once, never lost).
 */
async function settleFailure(deps: ProcessorDeps, lock: KeyLock, failed: FailedSlice): Promise<boolean> {
  const { options, events } = deps;
  const { slice, error, names } = failed;
  const plan = planFailure(slice.ids, failed.previous, error, options, Date.now());
  const serialized = serializeError(error);
  if (plan.dead.length > 0) await deps.deadLetters.add(slice.key, plan, serialized);
  const retry = plan.retry.map((part, i) => ({ id: `${failed.sliceId}:${i}`, delayMs: part.delayMs, slice: JSON.stringify(part.slice) }));
  const status = Number(
    await runScript(
      deps.client,
      'fail-slice',
      [names.inFlight, names.lock, names.retry, names.retrySlices, names.tracked, names.trackedInFlight, names.ticketPrefix, names.lastClaim],
      [lock.value, JSON.stringify({ retry, dead: { ids: plan.dead, message: serialized.message } }), MAX_TICKET_ERRORS, `${failed.sliceId}:failed`],
    ),
  );
  if (status === ScriptStatus.LockNotHeld) {
    // The next holder restores these ids and runs them again: their letters would be stale.
    if (plan.dead.length > 0) await deps.deadLetters.undo(slice.key, plan);
    return false;
  }
  log(options.logger, plan.outcome === 'retry' ? 'warn' : 'error', 'batch-by-key: slice failed', {
    err: error,
    key: slice.key,
    ids: slice.ids.length,
    attempt: slice.attempt,
    outcome: plan.outcome,
  });
  events.emit('slice:failed', { ...slice, durationMs: failed.durationMs, error, outcome: plan.outcome, ...(plan.retryInMs !== undefined && { retryInMs: plan.retryInMs }) });
  if (plan.dead.length > 0) events.emit('dead', { key: slice.key, ids: plan.dead, error, attempts: plan.attempts });
  return true;
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
 * Waits until something is due (a zset time, a failed slice's backoff). A push that landed after
 * our last claim found the job still active, so it could not bring the delayed job forward:
 * look again once it is delayed.
 */
async function delayUntilReady(client: RedisClient, job: KeyJob, token: string, names: KeyNames, waitMs: number, options: ResolvedOptions): Promise<never> {
  await job.moveToDelayed(Date.now() + waitMs, token);
  try {
    const now = await dueIn(client, options.store, names);
    if (now >= 0 && now < waitMs) await job.changeDelay(now);
  } catch (err) {
    // The job is delayed already; at worst a push that raced with it waits for its earlier time.
    log(options.logger, 'warn', 'batch-by-key: could not re-check a delayed key', { err, key: job.data.key });
  }
  throw new DelayedError();
}

async function release(client: RedisClient, names: KeyNames, lockValue: string, mode: 'ack' | 'keep', options: ResolvedOptions): Promise<number> {
  const status = Number(
    await runScript(client, 'release', [names.lock, names.inFlight, names.lastClaim, names.trackedInFlight, names.ticketPrefix, names.inFlightMark], [lockValue, mode]),
  );
  if (status === ScriptStatus.LockNotHeld) {
    log(options.logger, 'warn', 'batch-by-key: the key lock expired before release; in-flight ids will be retried', { lock: names.lock });
  }
  return status;
}

/** BullMQ aborts a job's signal with whatever reason was given to cancelJob; ours is always a ShutdownError. */
function asShutdown(bullSignal: AbortSignal | undefined): AbortSignal {
  const controller = new AbortController();
  const relay = () => controller.abort(new ShutdownError(`the worker is closing or cancelled the job: ${String(bullSignal?.reason)}`));
  if (bullSignal?.aborted) relay();
  else bullSignal?.addEventListener('abort', relay, { once: true });
  return controller.signal;
}
