import { DelayedError } from '../bullmq';
import type Redlock from 'redlock';
import type { DeadLetterBox } from './dead-letters';
import type { BatcherEmitter } from '../core/events';
import { backoffDelay, mayRetry, settleFailure } from './failures';
import type { CancelSource } from '../core/stop';
import type { JobCancels } from './cancels';
import { maxRuntime, Stop, stopped } from './interrupt';
import { iterate, nothingClaimed, sliceIdOf, type Finished, type RunOutcome } from './iteration';
import { JOB_NAME, LEVEL } from '../storage/job';
import type { Keyspace, KeyNames } from '../storage/keys';
import { KeyLock } from './lock';
import type { JobFinisher } from './finisher';
import { rateLimitOf } from './flow';
import type { RunOptions } from './run-options';
import { TICKET_JOB_NAME, type TicketOutbox } from '../storage/ticket-outbox';
import { runTicketCallback } from './ticket-callback';
import { log } from '../core/logger';
import type { ClaimCall, ClaimResult, LockRef, Released } from '../storage/protocol';
import { KeySession, type SessionEnv } from '../storage/key-session';
import type { QueueLists } from '../storage/batcher-protocol';
import { budgetOf, demote, preemption } from './scheduling';
import type { RedisClient } from '../storage/scripts';
import type { EachIteration, FallbackProcessor, KeyJob, KeyProcessor, RateLimit } from '../core/types';

/** @internal */
export interface ProcessorDeps {
  client: RedisClient;
  /** What every run's `KeySession` shares (the client, the store, the ticket outbox). */
  sessions: SessionEnv;
  redlock: Redlock;
  keyspace: Keyspace;
  options: RunOptions;
  handler: () => EachIteration;
  deadLetters: DeadLetterBox;
  events: BatcherEmitter;
  /** BullMQ's wait and active lists of the batcher's shard queues (fair scheduling reads them). */
  queueLists: () => readonly QueueLists[];
  /** Resolves when this worker's store is the batcher's (checked at the first run; see agreement.ts). */
  agree: () => Promise<void>;
  tickets: TicketOutbox;
  /** Set for workers made by createWorker: a run's last claim completes its job too (see finisher.ts). */
  finisher?: JobFinisher;
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
    if (fallback && job.name !== JOB_NAME && job.name !== TICKET_JOB_NAME) {
      await fallback(job, token, signal);
      return;
    }
    return runJob(deps, job, token ?? '', signal);
  };
}

/**
 * `createWorker`'s processor: two declared parameters, so BullMQ builds no AbortController per
 * job (see cancels.ts); the worker's cancelJob and cancelAllJobs reach its runs through `cancels`.
 */
export function workerKeyProcessor(deps: ProcessorDeps, cancels: JobCancels): KeyProcessor {
  return async function processKeyJob(job, token): Promise<void> {
    const id = job.id!;
    const cancel = cancels.open(id);
    try {
      return await runJob(deps, job, token ?? '', cancel);
    } finally {
      cancels.close(id);
    }
  };
}

async function runJob(deps: ProcessorDeps, job: KeyJob, token: string, cancel: CancelSource | undefined): Promise<void> {
  if (job.name === TICKET_JOB_NAME) {
    const { onTicketSettled, sliceTimeoutMs, logger } = deps.options;
    return runTicketCallback(deps.tickets.deps, job, token, cancel, onTicketSettled, { timeoutMs: sliceTimeoutMs, logger });
  }
  if (job.name !== JOB_NAME) throw new Error(`batch-by-key: no processor for job name ${JSON.stringify(job.name)}`);
  // A worker on another store than the pushers' must touch nothing: the job fails (logged),
  // the ids stay, and the recovery sweep tries again once the deployment is fixed.
  await deps.agree();
  await runKey(deps, job, token, cancel);
}

async function runKey(deps: ProcessorDeps, job: KeyJob, token: string, cancel: CancelSource | undefined): Promise<void> {
  const { keyspace, options } = deps;
  const names = keyspace.forKey(job.data.key);
  // The fetch of this job may have made its first claim already (see finisher.ts).
  const fused = deps.finisher?.takeFirst(job.id);
  const lockRef: LockRef = { value: fused?.lock ?? KeyLock.newValue(), ttlMs: options.lockTtlMs };
  const session = new KeySession(deps.sessions, job.data.key, names, lockRef);
  const single = options.concurrencyPerKey === 1;
  const finish = () => (single ? deps.finisher?.callFor(job, token) : undefined);
  let lock: KeyLock | undefined;
  try {
    const rate = rateLimitOf(options.rateLimit, job.data.key);
    const sentAt = fused?.sentAt ?? Date.now();
    // Takes the lock, recovers what a dead run left in any lane, and claims the first slice.
    const first = fused?.claim
      ? await session.adopt(fused.claim)
      : await session.claim({
          claimId: sliceIdOf(lockRef.value, 0, 1),
          settle: 'recover',
          count: options.sliceSize,
          takeLock: true,
          releaseIfEmpty: single,
          ...(rate && { rate }),
        });
    // Another run still holds the key (a stalled worker, or a crashed one until its TTL ends).
    if (!first.held) return await requeue(job, token, busyFor(first.lockTtlMs, names, options));
    // Nothing to do (a job whose ids an earlier run took): that claim released the lock already,
    // so there is nothing to renew or iterate.
    if (first.ids.length === 0 && single) return await conclude(deps, job, token, session, nothingClaimed(first.waitMs, true));
    // The run's one stop (each slice's ctx.signal with a single lane): a shutdown or a lost lock.
    const stop = new Stop(cancel);
    lock = new KeyLock(deps.redlock, names.lock, lockRef.value, sentAt, options.lockTtlMs, options.logger, (error) => stop.abort(error));
    const outcome = await runSlices(deps, job, session, first, stop, rate, finish);
    // No renewal may race the release below (it would fail and log a spurious warning).
    lock.stop();
    await conclude(deps, job, token, session, outcome);
  } catch (err) {
    if (err instanceof DelayedError) throw err;
    // Redis trouble outside a slice (or a rateLimit function that threw). Failing the job would
    // leave the key to the recovery sweep; retrying it is better. The in-flight ids (if any) are
    // recovered by the next run. The lock is given back (fenced by its value) even if only the
    // first claim's lost reply took it, or the key would wait out its TTL.
    log(options.logger, 'warn', 'batch-by-key: run interrupted by an error; retrying the key', { err, key: job.data.key });
    await session.release('keep').catch(() => undefined);
    return await requeue(job, token, backoffDelay(options.backoff, 1, err));
  } finally {
    lock?.stop();
  }
}

/** How long to wait for a lock held by another run, from its PTTL. */
function busyFor(pttl: number, names: KeyNames, options: RunOptions): number {
  if (pttl === -1) {
    log(options.logger, 'warn', 'batch-by-key: lock key has no TTL (set by hand?); delete it to unblock the key', { resource: names.lock });
    return options.lockTtlMs;
  }
  // -2: released just now.
  return Math.max(0, pttl);
}

async function runSlices(
  deps: ProcessorDeps,
  job: KeyJob,
  session: KeySession,
  first: ClaimResult & { held: true },
  run: Stop,
  rate: RateLimit | undefined,
  finish: () => ClaimCall['finish'],
): Promise<RunOutcome> {
  const { options } = deps;
  return iterate(
    {
      rate,
      session,
      sliceSize: options.sliceSize,
      concurrency: options.concurrencyPerKey,
      sliceTimeoutMs: options.sliceTimeoutMs,
      shutdownTimeoutMs: options.shutdownTimeoutMs,
      handler: deps.handler(),
      around: options.around,
      events: deps.events,
      key: job.data.key,
      job,
      stop: run,
      interrupts: [
        stopped(run),
        maxRuntime(Date.now(), budgetOf(job.data.key, options.maxRuntimeMs, options.weight, options.logger)),
        ...(options.scheduling === 'fair'
          ? [preemption(deps.client, deps.queueLists, options.logger, { level: Number(job.priority ?? 0), startedAt: Date.now() })]
          : []),
      ],
      settleFailure: (failed) => settleFailure(deps, session, failed),
      mayRunAgain: (slice) => mayRetry(slice.attempts, slice.isolating, options),
      finish,
    },
    first,
  );
}

/** Commits what the run ended with, releases the key and moves the job on. */
async function conclude(deps: ProcessorDeps, job: KeyJob, token: string, session: KeySession, outcome: RunOutcome): Promise<void> {
  const { options } = deps;
  const lock = session.lock;
  const key = job.data.key;
  switch (outcome.kind) {
    case 'drained':
      if (outcome.finished) return finished(deps, job, outcome.finished);
      // A run with lanes releases after its last claim: ids pushed in between had no job add.
      if (!outcome.released && (await releaseKey(deps, session, 'ack')) === 'pending') return requeue(job, token, 0);
      return;
    case 'waiting':
      if (!outcome.released) await releaseKey(deps, session, 'ack');
      return delayUntilReady(session, job, token, outcome.waitMs, options);
    case 'stopped': {
      log(options.logger, 'debug', 'batch-by-key: interrupted, requeued behind waiting keys', { key, reason: outcome.reason });
      deps.events.emit('interrupted', { key, job, reason: outcome.reason });
      // Puts the slice in flight back in front of the pending ids (and holds the key, for a retryAfter).
      let heldMs = 0;
      if (outcome.restore || outcome.holdMs) {
        const held = await session.settle({
          lane: 0,
          claimId: `${lock.value}:restore`,
          how: outcome.restore ? 'restore' : 'ack',
          holdMs: outcome.holdMs,
        });
        heldMs = held ?? outcome.holdMs ?? 0;
      }
      await releaseKey(deps, session, outcome.restore || outcome.holdMs ? 'keep' : 'ack');
      // The upstream asked for a pause: the job waits out the hold (its floor and backoff
      // included; nothing is due before).
      if (outcome.holdMs) return delayUntilReady(session, job, token, heldMs, options);
      // A key that had its turn goes behind keys that have not (a shutdown or a timeout is no turn).
      if (options.scheduling === 'fair' && (outcome.reason === 'max_runtime' || outcome.reason === 'preempted')) await demote(job);
      return requeue(job, token, 0);
    }
    case 'lock_lost':
      log(options.logger, 'warn', 'batch-by-key: lost the key lock; the slice will be retried by the next run', { key });
      deps.events.emit('interrupted', { key, job, reason: 'lock_lost' });
      return requeue(job, token, 0);
  }
}

/**
 * The run's last claim completed its job (see finisher.ts): BullMQ's completion takes that
 * claim's reply. Callbacks of tickets it settled are added now; if that fails they stay in the
 * key's outbox for the recovery sweep, since a completed job can no longer be requeued.
 */
async function finished(deps: ProcessorDeps, job: KeyJob, { reply, settled, finish, sentAt }: Finished): Promise<void> {
  if (job.id) deps.finisher?.completed(job.id, finish, reply, sentAt);
  if (settled.length === 0) return;
  await deps.tickets
    .hand(job.data.key, settled)
    .catch((err: unknown) =>
      log(deps.options.logger, 'warn', 'batch-by-key: could not add ticket callbacks; the recovery sweep will', { err, key: job.data.key }),
    );
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
async function delayUntilReady(session: KeySession, job: KeyJob, token: string, waitMs: number, options: RunOptions): Promise<never> {
  // A wait is no turn: when it ends (a rate limit's window, a retryAfter, a backoff, a zset
  // time) the key lines up with light keys, which running keys yield to, rather than behind
  // every heavy key (where it could wait a whole budget for a slot).
  if (options.scheduling === 'fair' && Number(job.priority ?? 0) !== LEVEL.light) await job.changePriority({ priority: LEVEL.light });
  await job.moveToDelayed(Date.now() + waitMs, token);
  let delayMs = waitMs;
  try {
    const now = await session.dueIn();
    if (now >= 0 && now < waitMs) {
      await job.changeDelay(now);
      delayMs = now;
    }
  } catch (err) {
    // The job is delayed already; at worst a push that raced with it waits for its earlier time.
    log(options.logger, 'warn', 'batch-by-key: could not re-check a delayed key', { err, key: job.data.key });
  }
  if (delayMs <= PROMPT_WAKE_MS) wakeWhenDue(job, delayMs);
  throw new DelayedError();
}

/**
 * Waits up to this long are ended by a timer of the worker that set them, as well as by BullMQ.
 * A worker blocked on BullMQ's marker wakes for a delayed job only at a timeout, which Redis
 * serves on its timer tick (100 ms at the default `hz` 10): a key waiting out a 100 ms rate-limit
 * window waited up to twice that, and ran at half its limit.
 */
const PROMPT_WAKE_MS = 1_000;

/**
 * Promotes the delayed job when its delay ends (a ms late, so the key's hold, timed by Redis,
 * has ended too). If this worker dies first, or the job moved meanwhile, BullMQ's own promotion
 * still runs it; a promote that finds it no longer delayed changes nothing.
 */
function wakeWhenDue(job: KeyJob, delayMs: number): void {
  setTimeout(() => void job.promote().catch(() => undefined), delayMs + 1).unref();
}

async function releaseKey(deps: ProcessorDeps, session: KeySession, mode: 'ack' | 'keep'): Promise<Released> {
  const released = await session.release(mode);
  if (released === 'lost') {
    log(deps.options.logger, 'warn', 'batch-by-key: the key lock expired before release; in-flight ids will be retried', {
      lock: session.names.lock,
    });
  }
  return released;
}
