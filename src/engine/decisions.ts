import { RateLimitedError } from '../core/errors';
import type { StopReason } from '../core/types';

/**
 * The run's decisions, as pure functions of plain data: what a lane does once its slice has
 * ended, how the lanes' ends make the run's, and how a run concludes (what it settles, how it
 * releases the key, and where its job goes). `KeyRun` (key-run.ts) applies them through its
 * `KeySession`; test/decisions.test.ts tests them without Redis.
 */

/** How one job run ended, when it did not throw. */
export type RunOutcome =
  /**
   * No id left: the last slice is acked; `released` when that claim released the lock too, and
   * `finished` when it completed the job as well (see claims/transport.ts `last`);
   * `pausedUntilResumed` when its ids stay, their key paused until resumed (its job ends all the same).
   */
  | { kind: 'drained'; released: boolean; finished?: Finished; pausedUntilResumed?: true }
  /**
   * Ids are pending but none is due for `waitMs` (a zset time, a failed slice's backoff); the last
   * slice is acked. `limited`: a batcher-wide limit refused the lane's next claim (see
   * global-limits.ts): the last slice is not acked yet, and the job waits `waitMs` as it is.
   */
  | { kind: 'waiting'; waitMs: number; released: boolean; limited?: true }
  /**
   * Stopped between slices; the last slice is done but not yet acked (release acks it), or,
   * with `restore`, it gave up because of the stop and goes back to pending.
   */
  | { kind: 'stopped'; reason: StopReason; restore?: boolean; holdMs?: number }
  /** The lock was lost; nothing can be acked, the in-flight ids wait for the next holder. */
  | { kind: 'lock_lost' };

/**
 * What the claim that completed the job left its run (see claims/transport.ts `last`): the
 * tickets its ack settled, whose callbacks the run adds once the job is complete.
 */
export interface Finished {
  settled: readonly string[];
}

/** How a stopped lane's last slice is settled without a claim: restored to pending, or acked, and the key held `holdMs`. */
export interface SliceSettle {
  how: 'ack' | 'restore';
  holdMs: number | undefined;
}

/**
 * The one rule for a stopped slice: it goes back to pending when the stop made it give up
 * (`restore`), and it holds the key when its handler asked to (`holdMs`); a slice that needs
 * neither is acked by the release (lane 0) or by `laneEnd`'s settle (the other lanes).
 */
export function stoppedSlice(outcome: RunOutcome & { kind: 'stopped' }): SliceSettle | undefined {
  if (!outcome.restore && !outcome.holdMs) return undefined;
  return { how: outcome.restore ? 'restore' : 'ack', holdMs: outcome.holdMs };
}

/**
 * What a lane settles itself once it ends with `outcome`: lanes other than lane 0 settle their own
 * stopped slice (acked, or restored and held); lane 0's is the run's, settled by its conclusion.
 */
export function laneEnd(lane: number, outcome: RunOutcome): SliceSettle | undefined {
  if (lane > 0 && outcome.kind === 'waiting' && outcome.limited) return { how: 'ack', holdMs: undefined };
  if (lane === 0 || outcome.kind !== 'stopped') return undefined;
  return stoppedSlice(outcome) ?? { how: 'ack', holdMs: undefined };
}

/**
 * What a lane does after its slice's handler threw `error` while its run's stop said `stop`: a
 * handler that gave up because the run stopped (a shutdown, a lost lock) is stopping, not
 * failing, and a shutdown's slice goes back to pending; one whose upstream said "not now"
 * (`ctx.retryAfter`) goes back unchanged and holds the key, no attempt spent (at least 1 ms, so
 * that an ask for 0 still holds it: the claim applies the floor). Undefined: a failure (a slice
 * timeout included), to retry, split or dead-letter (see failures.ts).
 */
export function afterFailure(stop: 'lock_lost' | 'shutdown' | undefined, error: unknown): RunOutcome | undefined {
  if (stop === 'lock_lost') return { kind: 'lock_lost' };
  if (stop === 'shutdown') return { kind: 'stopped', reason: 'shutdown', restore: true };
  if (error instanceof RateLimitedError)
    return { kind: 'stopped', reason: 'rate_limited', restore: true, holdMs: Math.max(1, error.retryAfterMs) };
  return undefined;
}

/** A lane's end when its claim found nothing: waiting `waitMs` for something due, or drained (0). */
export function nothingClaimed(waitMs: number, released: boolean): RunOutcome {
  if (waitMs > 0) return { kind: 'waiting', waitMs, released };
  return waitMs < 0 ? { kind: 'drained', released, pausedUntilResumed: true } : { kind: 'drained', released };
}

/** The run's outcome from a stop reason (a lost lock is no stop: nothing may be settled). */
export function stoppedFor(reason: StopReason | undefined, restore?: true): RunOutcome | undefined {
  if (reason === undefined) return undefined;
  if (reason === 'lock_lost') return { kind: 'lock_lost' };
  return restore ? { kind: 'stopped', reason, restore } : { kind: 'stopped', reason };
}

/** The run's outcome from its lanes': a lost lock over a stop, a stop over a wait, a wait over drained. */
export function combine(outcomes: readonly RunOutcome[]): RunOutcome {
  if (outcomes.length === 1) return outcomes[0]!;
  const first = (kind: RunOutcome['kind']) => outcomes.find((o) => o.kind === kind);
  const waits = outcomes.flatMap((o) => (o.kind === 'waiting' ? [o.waitMs] : []));
  // Lane 0 restores its own slice after a shutdown (through the release), so its stop is the one that says so.
  const stopped = outcomes[0]?.kind === 'stopped' ? outcomes[0] : first('stopped');
  // Lanes never release the lock in a claim: the run does once they have all ended.
  // A lane a limit refused makes the run's wait one of the limit's (nothing due sooner could be claimed).
  const limited = outcomes.some((o) => o.kind === 'waiting' && o.limited);
  return (
    first('lock_lost') ??
    stopped ??
    (waits.length > 0
      ? { kind: 'waiting', waitMs: Math.min(...waits), released: false, ...(limited && { limited: true as const }) }
      : outcomes.some((o) => o.kind === 'drained' && o.pausedUntilResumed)
        ? { kind: 'drained', released: false, pausedUntilResumed: true }
        : { kind: 'drained', released: false })
  );
}

/** Where a concluded run's job goes. */
export type JobMove =
  /** Completed already, by the run's last claim (see claims/transport.ts; the outcome's `finished`): BullMQ's completion takes its reply. */
  | { to: 'completed' }
  /** Nothing left: the processor returns and BullMQ completes the job; with `ifPending`, requeued at once when the release found ids pushed meanwhile. */
  | { to: 'done'; ifPending?: 'requeue' }
  /**
   * Delayed until something is due: `waitMs`, or, for a hold, what the settle reports (`waitMs`
   * when it could not); `limited`: for `waitMs` exactly, at the job's level (see global-limits.ts).
   */
  | { to: 'delayed'; waitMs: number; held?: true; limited?: true }
  /** Requeued behind waiting keys at once; `demote` for a key that had its turn (fair scheduling). */
  | { to: 'requeued'; demote: boolean };

/** How a run concludes: what it settles, how it releases the key, where its job goes, and whether it was interrupted. */
export interface Conclusion {
  /** Lane 0's stopped slice, settled before the release (see `stoppedSlice`). */
  settle?: SliceSettle;
  /** How the key's lock is released: acking the slice in flight, or keeping it for the next run; none when a claim released it already. */
  release?: 'ack' | 'keep';
  job: JobMove;
  /** The run was interrupted: the 'interrupted' event's reason (and its log line). */
  interrupted?: StopReason;
}

/** The conclusions that carry no data of their run: one object each, not one per run (a one-slice run's is one of them). */
const COMPLETED: Conclusion = Object.freeze({ job: Object.freeze({ to: 'completed' }) });
const DONE: Conclusion = Object.freeze({ job: Object.freeze({ to: 'done' }) });
const RELEASE_THEN_DONE: Conclusion = Object.freeze({ release: 'ack', job: Object.freeze({ to: 'done', ifPending: 'requeue' }) });
const LOCK_LOST: Conclusion = Object.freeze({ job: Object.freeze({ to: 'requeued', demote: false }), interrupted: 'lock_lost' });

/** Decides how a run that ended with `outcome` concludes. */
export function conclusion(outcome: RunOutcome, scheduling: 'fair' | 'fifo'): Readonly<Conclusion> {
  switch (outcome.kind) {
    case 'drained':
      if (outcome.finished) return COMPLETED;
      // A run with lanes releases after its last claim: ids pushed in between had no job add.
      return outcome.released ? DONE : RELEASE_THEN_DONE;
    case 'waiting':
      return {
        ...(!outcome.released && { release: 'ack' as const }),
        job: { to: 'delayed', waitMs: outcome.waitMs, ...(outcome.limited && { limited: true as const }) },
      };
    case 'stopped': {
      const settle = stoppedSlice(outcome);
      // The upstream asked for a pause: the job waits out the hold (its floor and backoff
      // included; nothing is due before). Else a key that had its turn goes behind keys that
      // have not (a shutdown or a timeout is no turn).
      const job: JobMove = outcome.holdMs
        ? { to: 'delayed', waitMs: outcome.holdMs, held: true }
        : { to: 'requeued', demote: scheduling === 'fair' && (outcome.reason === 'max_runtime' || outcome.reason === 'preempted') };
      return { ...(settle && { settle }), release: settle ? 'keep' : 'ack', job, interrupted: outcome.reason };
    }
    case 'lock_lost':
      return LOCK_LOST;
  }
}
