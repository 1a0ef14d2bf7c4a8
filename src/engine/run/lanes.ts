import type { ClaimArgs, ClaimResult } from '../../storage/protocol';
import type { Completed } from '../claims/transport';
import { combine, laneEnd, nothingClaimed, stoppedFor, type RunOutcome, type SliceSettle } from '../decisions';
import { firstReason, Stop, stopReasonOf } from '../interrupt';
import type { Refusal } from './limits';
import { runSlice } from './slice';
import { sliceIdOf, type RunState } from './state';

/**
 * The lanes of one run that holds its key: `concurrencyPerKey` loops, each claiming a slice
 * (acking its previous one in the same call), running it (slice.ts), then asking the interrupt
 * checks, until one of them ends the run. What they share besides the run: the first stop, and
 * the first error one threw.
 */
export class Lanes {
  /** Set by the first lane that stops the run; the others stop after their slice. */
  private stoppedBy: RunOutcome | undefined;
  /** What a lane threw (Redis trouble): the run rethrows it once every lane has stopped. */
  private error: { thrown: unknown } | undefined;

  constructor(private readonly run: RunState) {}

  /**
   * Runs the lanes to the run's outcome. `first` is lane 0's first claim, made as the run took the
   * lock: it recovered whatever a dead run left in flight, in any lane, so the other lanes start
   * after it, and only when it found work. A single lane's last claim releases the lock too.
   */
  async outcome(first: ClaimResult & { held: true }): Promise<RunOutcome> {
    const concurrency = this.run.env.options.concurrencyPerKey;
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
    const { run } = this;
    const { session, limits, claims } = run;
    const { sliceSize, concurrencyPerKey } = run.env.options;
    // With lanes, the lock is released once every lane has ended (see the run's conclusion).
    const single = concurrencyPerKey === 1;
    // One signal per lane and run: a timed-out slice ends its lane (and the run), so it never needs
    // resetting, and a timeout in one lane never aborts another lane's slice.
    const signal = single ? run.stop : new Stop(undefined, run.stop);
    // Whether the last claim emptied pending, so that this one likely ends the run: only then is
    // it made as the run's last claim (with BullMQ's completion on the fused transport: building
    // and sending that costs a few µs).
    let emptied = false;
    for (let n = 1; ; n++) {
      const sliceId = sliceIdOf(session.lock.value, lane, n);
      const given = n === 1 ? first : undefined;
      // Asked at each slice, not once per run: a limit set, lowered or a batcher hold heard while
      // the run goes on holds from its next slice (a local read: no command while none is in force).
      const count = !given && limits.gatedNow() ? await limits.pass(lane) : sliceSize;
      if (typeof count !== 'number') return this.refused(lane, sliceId, count);
      let claimed: ClaimResult;
      if (given) claimed = given;
      else {
        const call: ClaimArgs = {
          claimId: sliceId,
          settle: 'ack',
          count,
          lane,
          releaseIfEmpty: single,
          ...(run.rate && { rate: run.rate }),
          ...(run.fill && { fill: run.fill }),
        };
        const made: ClaimResult | Completed =
          single && emptied ? await claims.last(session, call, run.job, run.token) : await session.claim(call);
        // The job is complete already: from here on nothing may requeue it (see decisions.ts `conclusion`).
        if ('completed' in made) return { kind: 'drained', released: true, finished: made.completed };
        claimed = made;
        if (limits.gated) limits.claimed(lane, claimed.held ? claimed.ids.length : 0);
      }
      if (!claimed.held) return { kind: 'lock_lost' };
      emptied = claimed.ids.length < sliceSize;
      if (claimed.ids.length === 0) return nothingClaimed(claimed.waitMs, single);
      if (limits.gated) await limits.onTime(lane, claimed.ids.length, run.stop);
      // Another lane's stop is this lane's too, but its slice succeeded: nothing to restore. A run
      // stopped before its slice starts (its job was fetched as the worker began closing or
      // pausing), or sent away by a lowered concurrency, hands the slice back unrun: asked here,
      // with nothing awaited until the handler starts, no slice starts past a new concurrency.
      const outcome =
        stoppedFor(stopReasonOf(run.stop) ?? this.shedNow(), true) ??
        (await runSlice(run, lane, signal, claimed, sliceId)) ??
        (this.stoppedBy && { ...this.stoppedBy, restore: false }) ??
        stoppedFor(firstReason(run.interrupts, { full: claimed.ids.length >= sliceSize }));
      if (outcome) return this.ended(lane, sliceId, outcome);
    }
  }

  /**
   * A lane a batcher-wide limit refused: it gave its place to a lighter key (a preemption: the job
   * goes behind it), or it waits with its job until the limit has room (see global-limits.ts).
   */
  private refused(lane: number, sliceId: string, refusal: Refusal): Promise<RunOutcome> {
    const outcome: RunOutcome =
      refusal.code === 'yield'
        ? { kind: 'stopped', reason: 'preempted' }
        : { kind: 'waiting', waitMs: refusal.waitMs, released: false, limited: true };
    return this.ended(lane, sliceId, outcome, outcome.kind === 'stopped');
  }

  /** A lane's end with `outcome`, which stops the run's other lanes (unless `stops` is false): it settles its own last slice (see decisions.ts `laneEnd`). */
  private async ended(lane: number, sliceId: string, outcome: RunOutcome, stops = true): Promise<RunOutcome> {
    if (stops) this.stoppedBy ??= outcome;
    const settle: SliceSettle | undefined = laneEnd(lane, outcome);
    if (settle) await this.run.session.settle({ lane, claimId: `${sliceId}:end`, how: settle.how, holdMs: settle.holdMs });
    return outcome;
  }

  private shedNow(): 'concurrency_lowered' | undefined {
    return this.run.shed?.(this.run.token) ? 'concurrency_lowered' : undefined;
  }
}
