import { setTimeout as sleep } from 'node:timers/promises';
import { DelayedError } from '../../bullmq';
import type { Fill } from '../../core/fill';
import { incidentBackoffMs } from '../../core/limits';
import { log } from '../../core/logger';
import { redisFailureKind } from '../../core/redis-errors';
import type { KeyJob } from '../../core/types';
import type { Level } from '../../storage/job';
import type { KeySession } from '../../storage/key-session';
import type { Released } from '../../storage/protocol';
import { conclusion, type Finished, type RunOutcome } from '../decisions';
import { backoffDelay } from '../failures';
import type { RunEnv } from '../run-env';

/** Redis' refusals in an incident that ends by itself (see `handOnAfterError`): retried, not given up on. */
const REFUSALS: ReadonlySet<string> = new Set(['OOM', 'BUSY', 'LOADING']);

/**
 * How one run of a key's job ends, and every move of that job: the run's conclusion applied
 * (decisions.ts `conclusion`: what it settles, how it releases the key, where its job goes), the
 * key handed on to its next job (`handOn`), the job itself moved to delayed (`requeue`), and the
 * hand-back after Redis trouble (`afterError`).
 */
export class RunEnd {
  constructor(
    private readonly env: RunEnv,
    private readonly job: KeyJob,
    private readonly token: string,
    private readonly session: KeySession,
  ) {}

  /**
   * Applies the run's conclusion: commits what it ended with, releases the key and moves the job
   * on. `fill` is the key's wait to fill, for a look at what is due (see `delayUntilReady`).
   */
  async conclude(outcome: RunOutcome, fill: Fill | undefined): Promise<void> {
    const { env, job, session } = this;
    const { options } = env;
    const key = session.key;
    const c = conclusion(outcome, options.scheduling);
    if (outcome.kind === 'drained' && outcome.finished) return this.completed(outcome.finished);
    // A key paused until resumed keeps its ids with no job until `resume` adds one; listed, so
    // that stats() and the sweep still see it (a push that adds its job lists no key).
    if (outcome.kind === 'drained' && outcome.pausedUntilResumed) await this.listForRecovery();
    if (c.interrupted) {
      if (c.interrupted === 'lock_lost') {
        log(
          options.logger,
          'warn',
          'batch-by-key: lost the key lock (it expired, or the key was dropped); a slice not dropped is retried by the next run',
          { key },
        );
      } else {
        log(options.logger, 'debug', 'batch-by-key: interrupted, requeued behind waiting keys', { key, reason: c.interrupted });
      }
      env.events.emit('interrupted', { key, job, reason: c.interrupted });
      // Handed back on a shutdown or a lost lock: the job may not outlive its worker.
      if (c.interrupted === 'shutdown' || c.interrupted === 'lock_lost') await this.listForRecovery();
    }
    // Puts the slice in flight back in front of the pending ids (and holds the key, for a retryAfter).
    const heldMs = c.settle
      ? await session.settle({ lane: 0, claimId: `${session.lock.value}:restore`, how: c.settle.how, holdMs: c.settle.holdMs })
      : undefined;
    const released = c.release ? await this.release(c.release) : undefined;
    const move = c.job;
    const ownLevel = this.ownLevel();
    switch (move.to) {
      case 'done':
        if (move.ifPending && released === 'pending') await this.handOn(0, ownLevel);
        return;
      case 'delayed':
        // The limits wake a refused key by its job's id (see global-limits.ts): that job waits.
        if (move.limited) return this.requeue(move.waitMs);
        // A hold's wait is what the settle reports (its floor and backoff included; nothing is due before).
        return this.delayUntilReady(move.held ? (heldMs ?? move.waitMs) : move.waitMs, fill);
      case 'requeued':
        // A high-priority key keeps the wait list: it never waits behind others for a turn.
        return this.handOn(0, move.demote ? env.level(key, 'hadTurn') : ownLevel);
    }
  }

  /** Another run holds the key (a stalled worker, or a crashed one until its TTL ends): the key is handed on once its lock's `pttl` has passed. */
  busy(pttl: number): Promise<void> {
    const { options } = this.env;
    if (pttl === -1) {
      log(options.logger, 'warn', 'batch-by-key: lock key has no TTL (set by hand?); delete it to unblock the key', {
        resource: this.session.names.lock,
      });
    }
    // -2: released just now.
    return this.handOn(pttl === -1 ? options.lockTtlMs : Math.max(0, pttl), this.ownLevel());
  }

  /**
   * Moves this job to delayed; with 0 it is promoted behind every job already waiting. Only where
   * the job itself must wait: the batcher-wide limits wake a refused key by its job's id.
   */
  async requeue(delayMs: number): Promise<never> {
    await this.env.keyJobs.requeue(this.job, this.token, delayMs);
    throw new DelayedError();
  }

  /**
   * Hands the key back after Redis trouble outside a slice (`err`): the lock is given back (fenced
   * by its value) even if only the first claim's lost reply took it, or the key would wait out its
   * TTL (`expiresAt`); the key is listed for recovery; and its next job is added after the backoff.
   * The in-flight ids (if any) are recovered by the next run.
   */
  async afterError(err: unknown, expiresAt: number): Promise<void> {
    await this.releaseAfterError(expiresAt);
    await this.listForRecovery();
    await this.handOnAfterError(backoffDelay(this.env.options.backoff, 1, err));
  }

  /** The level this run's job was fetched at. */
  private ownLevel(): Level {
    return Number(this.job.priority ?? 0);
  }

  /** Hands the key on to its next job, due in `delayMs`, and this job completes (storage/key-job.ts `handOn` says why by an add). */
  private async handOn(delayMs: number, level: Level, moved = false): Promise<void> {
    await this.env.keyJobs.handOn(this.session.key, delayMs, level, { moved });
  }

  /**
   * The run's last claim completed its job (see claims/transport.ts `last`). Callbacks of tickets
   * it settled are added now; if that fails they stay in the key's outbox for the recovery sweep,
   * since a completed job can no longer be requeued.
   */
  private async completed({ settled }: Finished): Promise<void> {
    const { env } = this;
    const { key } = this.session;
    if (settled.length === 0) return;
    await env.outbox.hand(key, settled).catch((err: unknown) =>
      log(env.options.logger, 'warn', 'batch-by-key: could not add ticket callbacks; the recovery sweep will', {
        err,
        key,
      }),
    );
  }

  private async release(mode: 'ack' | 'keep'): Promise<Released> {
    const released = await this.session.release(mode);
    if (released === 'lost') {
      log(this.env.options.logger, 'warn', 'batch-by-key: the key lock expired before release; in-flight ids will be retried', {
        lock: this.session.names.lock,
      });
    }
    return released;
  }

  /**
   * Lists the key in its recovery index before a hand-back its job may not survive (its worker
   * closing, Redis trouble): the key's ids are then found by the sweep whatever becomes of it.
   */
  private async listForRecovery(): Promise<void> {
    const key = this.session.key;
    await this.env
      .listForRecovery(key)
      .catch((err: unknown) =>
        log(this.env.options.logger, 'warn', 'batch-by-key: could not list a handed-back key for recovery', { err, key }),
      );
  }

  /**
   * Gives the lock back after Redis trouble, which most likely refuses this release too (out of
   * memory, a busy script, a lost connection): the fenced release is retried, with the incident
   * backoff, until Redis answers or the lock has expired anyway (`expiresAt`, at most
   * `lockTtlMs` away). A run that gave up on its release left a lock with no run behind it, which
   * kept every id of the key waiting for the lock's TTL once Redis was back. A worker's close
   * waits for this too (README: Guarantees).
   */
  private async releaseAfterError(expiresAt: number): Promise<void> {
    for (let attempt = 1; ; attempt++) {
      try {
        await this.session.release('keep');
        return;
      } catch (err) {
        const waitMs = incidentBackoffMs(attempt);
        if (Date.now() + waitMs >= expiresAt) {
          log(this.env.options.logger, 'warn', 'batch-by-key: could not release the key lock; the key waits for its TTL', {
            err,
            lock: this.session.names.lock,
          });
          return;
        }
        await sleep(waitMs);
      }
    }
  }

  /**
   * Hands the key on after Redis trouble, retrying with the incident backoff while Redis refuses
   * (out of memory, a busy script, loading): an incident longer than the lock's TTL outlasts the
   * release's retries, and a refused requeue left the job active with no run behind it until
   * BullMQ's stalled check, 30-40 s after Redis answered. Ends once Redis answers, or at the first
   * failure that is no refusal (a closing worker's connections dropped: BullMQ fails the job, and
   * the key, listed, waits for the recovery sweep).
   */
  private async handOnAfterError(delayMs: number): Promise<void> {
    for (let attempt = 1; ; attempt++) {
      try {
        return await this.handOn(delayMs, this.ownLevel());
      } catch (err) {
        if (!REFUSALS.has(redisFailureKind(err) ?? '')) throw err;
        await sleep(incidentBackoffMs(attempt));
      }
    }
  }

  /**
   * Hands the key on to a job that waits until something is due (a zset time, a failed slice's
   * backoff). A push that landed after our last claim found the lock held, so it added no job:
   * look again once the next job waits, and bring it forward. The hand-on comes first: a zset or
   * filling push after the release may have added the key's job at its own, earlier time, which
   * the hand-on moves to ours; the look again, which sees that push's ids, moves it back. (Read
   * first, a push between the read and the hand-on would wait for our time.)
   */
  private async delayUntilReady(waitMs: number, fill: Fill | undefined): Promise<void> {
    const { env } = this;
    const { options } = env;
    const key = this.session.key;
    // A wait is no turn: when it ends (a rate limit's window, a retryAfter, a backoff, a zset
    // time) the key lines up with light keys (a high key in the wait list), which running keys
    // yield to, rather than behind every heavy key (where it could wait a whole budget for a slot).
    const level = options.scheduling === 'fair' ? env.level(key, 'light') : this.ownLevel();
    await this.handOn(waitMs, level);
    try {
      const now = await this.session.dueIn(fill);
      if (now >= 0 && now < waitMs) await this.handOn(now, level, true);
    } catch (err) {
      // The next job waits already; at worst a push that raced with it waits for its earlier time.
      log(options.logger, 'warn', 'batch-by-key: could not re-check a delayed key', { err, key });
    }
  }
}
