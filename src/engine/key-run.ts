import { setTimeout as sleep } from 'node:timers/promises';
import { DelayedError } from '../bullmq';
import { RateLimitedError, SliceCrashedError } from '../core/errors';
import { log } from '../core/logger';
import type { CancelSource } from '../core/stop';
import { levelsOf, type Level } from '../storage/job';
import type { KeySession } from '../storage/key-session';
import type { ClaimCall, ClaimResult, LockRef, Released, Traces } from '../storage/protocol';
import {
  afterFailure,
  combine,
  conclusion,
  laneEnd,
  nothingClaimed,
  stoppedFor,
  type Finished,
  type RunOutcome,
  type SliceSettle,
} from './decisions';
import { backoffDelay, mayRetry, settleFailure, type FailedSlice, type RetrySlice } from './failures';
import type { JobFinisher } from './finisher';
import { rateLimitOf } from './flow';
import { firstReason, maxRuntime, Stop, stopped, stopReasonOf, type InterruptCheck } from './interrupt';
import { runHandler, SliceContext, SliceFailure } from './iteration';
import { KeyLock } from './lock';
import type { RunEnv } from './run-env';
import { budgetOf, preemption } from './scheduling';
import { fillOf, type Fill } from '../core/fill';
import { incidentBackoffMs } from '../core/limits';
import { redisFailureKind } from '../core/redis-errors';
import type { EachIteration, Id, KeyJob, RateLimit, SliceInfo } from '../core/types';
import { windowOf, type Entered, type Unclaimed } from '../storage/limits-protocol';

/** Whether the run of the job under `token` must hand its job back before its next slice, for a lowered concurrency (see ShardWorker.shed). */
export type Shed = (token: string) => boolean;

/**
 * One run of a key's BullMQ job, and the one place its state lives: the job and its token, the
 * key's session under the run's lock (`session`), the lock's renewal, the run's stop, and what its
 * lanes share (the first stop, the first error). The decisions are decisions.ts's, made from plain
 * data; a `KeyRun` applies them through its session and its job.
 *
 * A run takes the key's lock in its first claim, runs `concurrency` lanes, each a loop that claims
 * a slice (acking its previous one in the same call), runs the handler, then asks the interrupt
 * checks; then it concludes: complete (nothing left), or move its own job to delayed, at once when
 * interrupted (so it lines up behind jobs already waiting), or until something is due (a zset
 * time, a failed slice's backoff). The job stays the same BullMQ job throughout, so a key never has
 * two. Progress is committed only after a slice succeeds, and the budget is checked only between
 * slices (as job-iteration does). A failed slice is settled on its own (see failures.ts) and never
 * fails the job; the job fails (BullMQ's own attempts are 1) only when Redis is too broken even to
 * move it to delayed, and the recovery sweep brings such a key back.
 * @internal
 */
export class KeyRun {
  /** Its `key` is the run's: read from the job once, before any user code could change `ctx.job.data`. */
  private readonly session: KeySession;
  /** The first claim the fetch of this job made, if it did (see finisher.ts). */
  private readonly fused: ReturnType<JobFinisher['takeFirst']>;
  private readonly single: boolean;
  private handler!: EachIteration;
  /** The run's one stop (each slice's ctx.signal with a single lane): a shutdown or a lost lock. Set once the run holds the key. */
  private stop!: Stop;
  private rate: RateLimit | undefined;
  /** The key's wait to fill (see core/fill.ts): its claims leave pending ids that wait to fill. */
  private fill: Fill | undefined;
  private interrupts: readonly InterruptCheck[] = [];
  /** Set by the first lane that stops the run; the others stop after their slice. */
  private stoppedBy: RunOutcome | undefined;
  /** What a lane threw (Redis trouble): the run rethrows it once every lane has stopped. */
  private error: { thrown: unknown } | undefined;
  /** Whether the run passes the batcher-wide limits before each claim (from the first slice a limit was in force at; see global-limits.ts). */
  private gated = false;
  /** The places its lanes hold under `globalConcurrency`, and, per lane, its last reservation of the shared window. */
  private readonly leases = new Set<string>();
  private readonly reserved = new Map<number, Unclaimed>();
  /** Per lane, when its last pass that reserved ids from the shared window was sent (performance.now()). */
  private readonly passSentAt = new Map<number, number>();

  constructor(
    private readonly env: RunEnv,
    private readonly finisher: JobFinisher | undefined,
    private readonly job: KeyJob,
    private readonly token: string,
    private readonly cancel: CancelSource | undefined,
    private readonly shed?: Shed,
  ) {
    const { options } = env;
    // The fetch of this job may have made its first claim already (see finisher.ts).
    const fused = finisher?.takeFirst(job.id);
    const lock: LockRef = { value: fused?.lock ?? KeyLock.newValue(), ttlMs: options.lockTtlMs };
    this.session = env.session(job.data.key, lock);
    this.single = options.concurrencyPerKey === 1;
    this.fused = fused;
  }

  async run(): Promise<void> {
    const { env, job, session } = this;
    const { options } = env;
    const key = session.key;
    let lock: KeyLock | undefined;
    const sentAt = this.fused?.sentAt ?? Date.now();
    try {
      const rate = (this.rate = rateLimitOf(options.rateLimit, key));
      const fill = (this.fill = fillOf(options.fill, key, options.sliceSize));
      // A claim the fetch made (just before a limit came into force) stands.
      this.gated = !this.fused?.claim && env.limits.active();
      const count = this.gated ? await this.pass(0) : options.sliceSize;
      // A limit refused: the key hands its turn on before it takes anything (see global-limits.ts).
      if (typeof count !== 'number') return await this.requeue(count.waitMs);
      // Takes the lock, recovers what a dead run left in any lane, and claims the first slice.
      const first = this.fused?.claim
        ? await session.adopt(this.fused.claim)
        : await session.claim({
            claimId: sliceIdOf(session.lock.value, 0, 1),
            settle: 'recover',
            count,
            takeLock: true,
            releaseIfEmpty: this.single,
            ...(rate && { rate }),
            ...(fill && { fill }),
          });
      // Another run still holds the key (a stalled worker, or a crashed one until its TTL ends).
      this.claimed(0, first.held ? first.ids.length : 0);
      if (!first.held) return await this.handOn(this.busyFor(first.lockTtlMs), this.ownLevel());
      // Nothing to do (a job whose ids an earlier run took): that claim released the lock already,
      // so there is nothing to renew or iterate.
      if (first.ids.length === 0 && this.single) return await this.conclude(nothingClaimed(first.waitMs, true));
      this.handler = env.handler();
      const stop = (this.stop = new Stop(this.cancel));
      lock = new KeyLock(env.redlock, session.names.lock, session.lock.value, sentAt, options.lockTtlMs, options.logger, stop);
      this.interrupts = [
        stopped(stop),
        maxRuntime(Date.now(), budgetOf(key, options.maxRuntimeMs, options.weight, options.logger)),
        ...(options.scheduling === 'fair'
          ? [
              preemption(env.client, env.queueLists, options.logger, {
                level: Number(job.priority ?? 0),
                light: levelsOf(options.priority).light,
                startedAt: Date.now(),
              }),
            ]
          : []),
      ];
      const outcome = await this.lanes(first);
      // No renewal may race the release below (it would fail and log a spurious warning).
      lock.stop();
      await this.conclude(outcome);
    } catch (err) {
      if (err instanceof DelayedError) throw err;
      // Redis trouble outside a slice (or a rateLimit, minSliceSize or maxWaitMs function that
      // threw). Failing the job would leave the key to the recovery sweep; retrying it is better.
      // The in-flight ids (if any) are recovered by the next run. The lock is given back (fenced
      // by its value) even if only the first claim's lost reply took it, or the key would wait
      // out its TTL.
      log(options.logger, 'warn', 'batch-by-key: run interrupted by an error; retrying the key', { err, key });
      lock?.stop();
      await this.releaseAfterError(lock?.expiresAt ?? sentAt + options.lockTtlMs);
      await this.listForRecovery();
      return await this.handOnAfterError(backoffDelay(options.backoff, 1, err));
    } finally {
      lock?.stop();
      if (this.gated) await this.leaveLimits();
    }
  }

  /**
   * Whether this run passes the limits from now on: once a limit is in force (or a batcher hold
   * heard), it passes them at each claim until its end, which gives back what it holds.
   */
  private gatedNow(): boolean {
    if (!this.gated && this.env.limits.active()) this.gated = true;
    return this.gated;
  }

  /**
   * A lane's pass through the batcher-wide limits before its claim (see global-limits.ts): how
   * many ids it may claim, or the refusal. It settles the lane's last reservation on the way.
   */
  private async pass(lane: number): Promise<number | (Entered & { code: Exclude<Entered['code'], 'ok'> })> {
    const { env, job } = this;
    const lease = `${this.session.lock.value}:${lane}`;
    const sentAt = performance.now();
    const entered = await env.limits.enter({
      lease,
      waiter: `${job.queueQualifiedName}|${job.id}`,
      level: Number(job.priority ?? 0),
      need: env.options.sliceSize,
      ...(this.reserved.has(lane) && { settle: this.reserved.get(lane) }),
    });
    this.reserved.delete(lane);
    if (entered.code !== 'ok') {
      this.leases.delete(lease);
      return entered;
    }
    if (env.limits.current().concurrency !== undefined) this.leases.add(lease);
    if (env.limits.current().rate) {
      this.reserved.set(lane, { at: entered.stamp, count: entered.granted });
      this.passSentAt.set(lane, sentAt);
    }
    return entered.granted;
  }

  /**
   * `globalRateLimit` is promised at handler start, and the window enforced has a margin for the
   * delay from a reservation to its slice's start (see limits-protocol.ts `windowOf`). A slice
   * whose start comes later than that (a busy event loop held the pass's reply, or the claim's)
   * would start in one window with ids reserved just after its own expired: its ids are counted
   * again now (limits-restamp.lua), and when the window has no room for them they wait for it,
   * unstarted, counted nowhere. A reply late again is counted again, a few times at most.
   */
  private async onTime(lane: number, n: number): Promise<void> {
    const { env } = this;
    const rate = env.limits.current().rate;
    const reservation = this.reserved.get(lane);
    let since = this.passSentAt.get(lane);
    this.passSentAt.delete(lane);
    if (!rate || !reservation || since === undefined) return;
    // Stamps and starts are whole ms: a start a ms inside the margin may read as outside it.
    const margin = windowOf({ rate }) - rate.durationMs - CLOCK_GRAIN_MS;
    let at = reservation.at;
    for (let late = 0; late < MAX_RESTAMPS && performance.now() - since > margin;) {
      if (this.stop.aborted) return;
      since = performance.now();
      const { stamp, waitMs } = await env.limits.restamp(at, n);
      if (stamp > 0) {
        at = stamp;
        late++;
        continue;
      }
      // Given back and not spent: the slice counts nowhere until a restamp spends it.
      at = 0;
      await sleep(Math.min(waitMs, RESTAMP_WAIT_STEP_MS));
      since = -Infinity;
    }
  }

  /** A gated lane's claim took `n` ids: what its reservation did not use is given back at its next pass. */
  private claimed(lane: number, n: number): void {
    const reservation = this.reserved.get(lane);
    if (reservation) this.reserved.set(lane, { at: reservation.at, count: reservation.count - n });
  }

  /** The run's end under the limits: its places go back, its reservations are settled (a failure is logged: the leases lapse by themselves). */
  private async leaveLimits(): Promise<void> {
    const settle = [...this.reserved.values()].filter((r) => r.count !== 0);
    const leases = [...this.leases];
    this.leases.clear();
    this.reserved.clear();
    await this.env.limits
      .leave({ leases, settle, need: this.env.options.sliceSize })
      .catch((err: unknown) => log(this.env.options.logger, 'warn', 'batch-by-key: could not give back global limits', { err }));
  }

  /** How long to wait for a lock held by another run, from its PTTL. */
  private busyFor(pttl: number): number {
    const { options } = this.env;
    if (pttl === -1) {
      log(options.logger, 'warn', 'batch-by-key: lock key has no TTL (set by hand?); delete it to unblock the key', {
        resource: this.session.names.lock,
      });
      return options.lockTtlMs;
    }
    // -2: released just now.
    return Math.max(0, pttl);
  }

  /**
   * The run's lanes. `first` is lane 0's first claim, made as the run took the lock: it recovered
   * whatever a dead run left in flight, in any lane, so the other lanes start after it, and only
   * when it found work. A single lane's last claim releases the lock too.
   */
  private async lanes(first: ClaimResult & { held: true }): Promise<RunOutcome> {
    const concurrency = this.env.options.concurrencyPerKey;
    const lanes = [this.contained(this.lane(0, first))];
    if (concurrency > 1 && first.ids.length > 0) {
      for (let lane = 1; lane < concurrency; lane++) lanes.push(this.contained(this.lane(lane)));
    }
    const outcomes = await Promise.all(lanes);
    if (this.error) throw this.error.thrown;
    return combine(outcomes);
  }

  /**
   * A lane that throws stops the others after their slice, and the run waits for them before it
   * rethrows: releasing the lock while a lane still runs would let a new run restore, and run
   * again, the slices still running here.
   */
  private async contained(lane: Promise<RunOutcome>): Promise<RunOutcome> {
    try {
      return await lane;
    } catch (thrown) {
      this.error ??= { thrown };
      this.stoppedBy ??= { kind: 'stopped', reason: 'shutdown' };
      return this.stoppedBy;
    }
  }

  private async lane(lane: number, first?: ClaimResult): Promise<RunOutcome> {
    const { session, single } = this;
    const { sliceSize } = this.env.options;
    // One signal per lane and run: a timed-out slice ends its lane (and the run), so it never needs
    // resetting, and a timeout in one lane never aborts another lane's slice.
    const signal = single ? this.stop : new Stop(undefined, this.stop);
    // With lanes, the lock is released once every lane has ended (see `conclude`).
    const releaseIfEmpty = single;
    // Whether the last claim emptied pending, so that this one likely ends the run: only then is
    // BullMQ's completion sent along (building and sending it costs a few µs).
    let emptied = false;
    for (let n = 1; ; n++) {
      const sliceId = sliceIdOf(session.lock.value, lane, n);
      const finish: ClaimCall['finish'] = releaseIfEmpty && emptied ? this.finisher?.callFor(this.job, this.token) : undefined;
      const given = n === 1 ? first : undefined;
      // Asked at each slice, not once per run: a limit set, lowered or a batcher hold heard while
      // the run goes on holds from its next slice (a local read: no command while none is in force).
      const count = !given && this.gatedNow() ? await this.pass(lane) : sliceSize;
      if (typeof count !== 'number') return this.refused(lane, sliceId, count);
      const sentAt = Date.now();
      const claimed: ClaimResult =
        given ??
        (await session.claim({
          claimId: sliceId,
          settle: 'ack',
          count,
          lane,
          releaseIfEmpty,
          ...(this.rate && { rate: this.rate }),
          ...(this.fill && { fill: this.fill }),
          ...(finish && { finish }),
        }));
      if (!given && this.gated) this.claimed(lane, claimed.held ? claimed.ids.length : 0);
      if (!claimed.held) return { kind: 'lock_lost' };
      // The job is complete already: from here on nothing may requeue it (see `conclude`).
      if (claimed.finished !== undefined && finish)
        return { kind: 'drained', released: true, finished: { reply: claimed.finished, settled: claimed.settled ?? [], finish, sentAt } };
      emptied = claimed.ids.length < sliceSize;
      if (claimed.ids.length === 0) return nothingClaimed(claimed.waitMs, releaseIfEmpty);
      if (this.gated) await this.onTime(lane, claimed.ids.length);
      // Another lane's stop is this lane's too, but its slice succeeded: nothing to restore. A run
      // stopped before its slice starts (its job was fetched as the worker began closing or
      // pausing), or sent away by a lowered concurrency, hands the slice back unrun: asked here,
      // with nothing awaited until the handler starts, no slice starts past a new concurrency.
      const outcome =
        stoppedFor(stopReasonOf(this.stop) ?? this.shedNow(), true) ??
        (await this.slice(lane, signal, claimed, sliceId)) ??
        (this.stoppedBy && { ...this.stoppedBy, restore: false }) ??
        stoppedFor(firstReason(this.interrupts, { full: claimed.ids.length >= sliceSize }));
      if (outcome) {
        this.stoppedBy ??= outcome;
        const settle = laneEnd(lane, outcome);
        if (settle) await this.settle(lane, `${sliceId}:end`, settle);
        return outcome;
      }
    }
  }

  /**
   * A lane a batcher-wide limit refused: it gave its place to a lighter key (a preemption: the job
   * goes behind it), or it waits with its job until the limit has room (see global-limits.ts).
   */
  private async refused(lane: number, sliceId: string, entered: { code: string; waitMs: number }): Promise<RunOutcome> {
    const outcome: RunOutcome =
      entered.code === 'yield'
        ? { kind: 'stopped', reason: 'preempted' }
        : { kind: 'waiting', waitMs: entered.waitMs, released: false, limited: true };
    this.stoppedBy ??= outcome.kind === 'stopped' ? outcome : undefined;
    const settle = laneEnd(lane, outcome);
    if (settle) await this.settle(lane, `${sliceId}:end`, settle);
    return outcome;
  }

  private shedNow(): 'concurrency_lowered' | undefined {
    return this.shed?.(this.token) ? 'concurrency_lowered' : undefined;
  }

  /** Settles a stopped lane's last slice (see decisions.ts `stoppedSlice`): how long the key is held, or undefined when the lock was lost. */
  private settle(lane: number, claimId: string, s: SliceSettle): Promise<number | undefined> {
    return this.session.settle({ lane, claimId, how: s.how, holdMs: s.holdMs });
  }

  /** Runs one claimed slice; an outcome when the slice ends the run. */
  private async slice(
    lane: number,
    signal: Stop,
    claimed: { ids: Id[]; retry?: RetrySlice; waitedMs?: number; payloadsJson?: string; traces?: Traces },
    sliceId: string,
  ): Promise<RunOutcome | undefined> {
    const { env, job } = this;
    const key = this.session.key;
    const slice: SliceInfo = { key, ids: claimed.ids, attempt: (claimed.retry?.attempts ?? 0) + 1, job };
    // A failed slice run again carries its ids' trace context in its JSON; pending ids, in the claim's reply.
    const traces = claimed.retry ? claimed.retry.traces : claimed.traces;
    const crashed = claimed.retry?.crashed ? claimed.retry : undefined;
    if (crashed && !mayRetry(crashed.attempts, crashed.isolating, env.options)) {
      // Its death was its last allowed run (a poison id that kills the worker): settle it as that
      // failure, which splits or dead-letters it, rather than run it to die once more.
      const error = new SliceCrashedError(
        `the run of this slice of key ${JSON.stringify(key)} died before it finished (a crash, an OOM kill, a lost lock)`,
      );
      const previous = { ...crashed, attempts: crashed.attempts - 1 };
      const stands = await this.failed({
        slice,
        previous,
        error,
        sliceId,
        lane,
        durationMs: 0,
        payloadsJson: claimed.payloadsJson,
        traces,
      });
      return stands ? undefined : { kind: 'lock_lost' };
    }
    const started = performance.now();
    try {
      const failures = await runHandler(this.handler, env.options, new SliceContext(slice, signal, claimed.payloadsJson, traces), signal);
      const durationMs = performance.now() - started;
      const acked = failures
        ? await this.partly(
            { slice, previous: claimed.retry, sliceId, lane, durationMs, payloadsJson: claimed.payloadsJson, traces },
            failures,
          )
        : slice.ids;
      if (!acked) return { kind: 'lock_lost' };
      if (acked.length === 0) return undefined;
      env.events.processed(acked.length);
      if (env.events.wants('slice:done')) {
        env.events.emit('slice:done', {
          ...slice,
          ids: acked,
          durationMs,
          ...(claimed.waitedMs !== undefined && { waitedMs: claimed.waitedMs }),
        });
      }
      return undefined;
    } catch (thrown) {
      // Redis trouble in a claim is not the slice's fault: the safety net in `run` retries the run.
      if (!(thrown instanceof SliceFailure)) throw thrown;
      // A stop's give-up or a retryAfter is no failure (see decisions.ts `afterFailure`).
      const stopping = afterFailure(stopReasonOf(this.stop), thrown.error);
      if (thrown.error instanceof RateLimitedError && thrown.error.scope === 'batcher') await env.limits.hold(thrown.error.retryAfterMs);
      if (stopping) return stopping;
      const failed = {
        slice,
        previous: claimed.retry,
        error: thrown.error,
        sliceId,
        lane,
        durationMs: performance.now() - started,
        payloadsJson: claimed.payloadsJson,
        traces,
      };
      if (!(await this.failed(failed))) return { kind: 'lock_lost' };
      // Not stopping, so a timeout aborted it. The abandoned handler may still run; a fresh run
      // gets a fresh signal.
      if (signal.aborted) return { kind: 'stopped', reason: 'slice_timeout' };
      return undefined;
    }
  }

  /**
   * Settles a slice whose handler returned having reported some ids failed (`ctx.fail`): one fenced
   * call acks the others and retries or dead-letters those (see failures.ts `planOutcomes`). The
   * ids acked, or undefined when the lock was lost first.
   */
  private async partly(
    slice: Omit<FailedSlice, 'error' | 'failures'>,
    failures: ReadonlyMap<Id, unknown>,
  ): Promise<readonly Id[] | undefined> {
    const [first] = failures.values();
    if (!(await this.failed({ ...slice, error: first, failures }))) return undefined;
    return slice.slice.ids.filter((id) => !failures.has(id));
  }

  /** Retries, splits or dead-letters a failed slice (see failures.ts); false when the lock was lost first. */
  private failed(failed: FailedSlice): Promise<boolean> {
    return settleFailure(this.env, this.session, failed);
  }

  /** Applies the run's conclusion (see decisions.ts `conclusion`): commits what it ended with, releases the key and moves the job on. */
  private async conclude(outcome: RunOutcome): Promise<void> {
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
        log(options.logger, 'warn', 'batch-by-key: lost the key lock; the slice will be retried by the next run', { key });
      } else {
        log(options.logger, 'debug', 'batch-by-key: interrupted, requeued behind waiting keys', { key, reason: c.interrupted });
      }
      env.events.emit('interrupted', { key, job, reason: c.interrupted });
      // Handed back on a shutdown or a lost lock: the job may not outlive its worker.
      if (c.interrupted === 'shutdown' || c.interrupted === 'lock_lost') await this.listForRecovery();
    }
    // Puts the slice in flight back in front of the pending ids (and holds the key, for a retryAfter).
    const heldMs = c.settle ? await this.settle(0, `${session.lock.value}:restore`, c.settle) : undefined;
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
        return this.delayUntilReady(move.held ? (heldMs ?? move.waitMs) : move.waitMs);
      case 'requeued':
        // A high-priority key keeps the wait list: it never waits behind others for a turn.
        return this.handOn(0, move.demote ? env.level(key, 'hadTurn') : ownLevel);
    }
  }

  /** The level this run's job was fetched at. */
  private ownLevel(): Level {
    return Number(this.job.priority ?? 0);
  }

  /**
   * Hands the key on to its next job, due in `delayMs`, and this job completes: after the run's
   * release, or when another run holds the key. A push that finds the key's lock free and this
   * job active adds the key's next job, so the next job is whichever the key's job pointer names:
   * one is added at `level` unless the key has one, and a delayed one is moved to `delayMs`
   * (add-job.lua, one call in the queue's slot). Moving this job instead, after the release, raced
   * such a push: the key then had two jobs waiting. A wait of at most PROMPT_WAKE_MS is ended by
   * this worker's timer too; so is a delayed job moved to 0, which BullMQ would promote only at a
   * worker's next fetch.
   */
  private async handOn(delayMs: number, level: Level, moved = false): Promise<void> {
    const next = await this.env.addKeyJob(this.session.key, delayMs, level);
    if ((delayMs > 0 || moved) && delayMs <= PROMPT_WAKE_MS) wakeWhenDue(next, delayMs);
  }

  /**
   * The run's last claim completed its job (see finisher.ts): BullMQ's completion takes that
   * claim's reply. Callbacks of tickets it settled are added now; if that fails they stay in the
   * key's outbox for the recovery sweep, since a completed job can no longer be requeued.
   */
  private async completed({ reply, settled, finish, sentAt }: Finished): Promise<void> {
    const { env, job } = this;
    const { key } = this.session;
    if (job.id) this.finisher?.completed(job.id, finish, reply, sentAt);
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
   * Moves this job to delayed; with 0 it is promoted behind every job already waiting. Only where
   * the job itself must wait: the batcher-wide limits wake a refused key by its job's id.
   */
  private async requeue(delayMs: number): Promise<never> {
    await this.job.moveToDelayed(Date.now() + delayMs, this.token);
    throw new DelayedError();
  }

  /**
   * Hands the key on to a job that waits until something is due (a zset time, a failed slice's
   * backoff). A push that landed after our last claim found the lock held, so it added no job:
   * look again once the next job waits, and bring it forward. The hand-on comes first: a zset or
   * filling push after the release may have added the key's job at its own, earlier time, which
   * the hand-on moves to ours; the look again, which sees that push's ids, moves it back. (Read
   * first, a push between the read and the hand-on would wait for our time.)
   */
  private async delayUntilReady(waitMs: number): Promise<void> {
    const { env } = this;
    const { options } = env;
    const key = this.session.key;
    // A wait is no turn: when it ends (a rate limit's window, a retryAfter, a backoff, a zset
    // time) the key lines up with light keys (a high key in the wait list), which running keys
    // yield to, rather than behind every heavy key (where it could wait a whole budget for a slot).
    const level = options.scheduling === 'fair' ? env.level(key, 'light') : this.ownLevel();
    await this.handOn(waitMs, level);
    try {
      const now = await this.session.dueIn(this.fill);
      if (now >= 0 && now < waitMs) await this.handOn(now, level, true);
    } catch (err) {
      // The next job waits already; at worst a push that raced with it waits for its earlier time.
      log(options.logger, 'warn', 'batch-by-key: could not re-check a delayed key', { err, key });
    }
  }
}

/** The id of a lane's n-th slice of a run (its claim's id too). */
export function sliceIdOf(lock: string, lane: number, n: number): string {
  return `${lock}:${lane}:${n}`;
}

/**
 * Waits up to this long are ended by a timer of the worker that set them, as well as by BullMQ.
 * A worker blocked on BullMQ's marker wakes for a delayed job only at a timeout, which Redis
 * serves on its timer tick (100 ms at the default `hz` 10): a key waiting out a 100 ms rate-limit
 * window waited up to twice that, and ran at half its limit.
 */
const PROMPT_WAKE_MS = 1_000;

/** A late slice is counted again at most this many times (see `onTime`): then it starts. */
const MAX_RESTAMPS = 5;
/** Redis stamps and handler starts as users time them are whole ms: each may be up to a ms early. */
const CLOCK_GRAIN_MS = 2;
/** A late slice that waits for room in the window looks at its run's stop this often. */
const RESTAMP_WAIT_STEP_MS = 100;

/** Redis' refusals in an incident that ends by itself (see `handOnAfterError`): retried, not given up on. */
const REFUSALS: ReadonlySet<string> = new Set(['OOM', 'BUSY', 'LOADING']);

/**
 * Promotes the delayed job when its delay ends (a ms late, so the key's hold, timed by Redis,
 * has ended too). If this worker dies first, or the job moved meanwhile, BullMQ's own promotion
 * still runs it; a promote that finds it no longer delayed changes nothing.
 */
function wakeWhenDue(job: KeyJob, delayMs: number): void {
  setTimeout(() => void job.promote().catch(() => undefined), delayMs + 1).unref();
}
