import { setTimeout as sleep } from 'node:timers/promises';
import { log } from '../../core/logger';
import type { Stop } from '../../core/stop';
import type { KeyJob, Logger } from '../../core/types';
import { windowOf, type Entered, type Unclaimed } from '../../storage/limits-protocol';
import type { GlobalLimits } from '../global-limits';

/** A limit's refusal of a lane's pass (see global-limits.ts): it yields, or waits `waitMs`. */
export type Refusal = Entered & { code: Exclude<Entered['code'], 'ok'> };

/** A late slice is counted again at most this many times (see `onTime`): then it starts. */
const MAX_RESTAMPS = 5;
/** Redis stamps and handler starts as users time them are whole ms: each may be up to a ms early. */
const CLOCK_GRAIN_MS = 2;
/** A late slice that waits for room in the window looks at its run's stop this often. */
const RESTAMP_WAIT_STEP_MS = 100;

/**
 * One run under the batcher-wide limits (see global-limits.ts): whether it passes them before
 * each claim (from the first claim a limit was in force at), the places its lanes hold under
 * `globalConcurrency`, and per lane its last reservation of the shared window and when the pass
 * that made it was sent. Its end (`leave`) gives back what it holds.
 */
export class RunLimits {
  private gatedFrom: boolean;
  private readonly leases = new Set<string>();
  private readonly reserved = new Map<number, Unclaimed>();
  /** Per lane, when its last pass that reserved ids from the shared window was sent (performance.now()). */
  private readonly passSentAt = new Map<number, number>();

  /** `gated`: whether the run passes the limits from its first claim on. */
  constructor(
    private readonly limits: GlobalLimits,
    private readonly run: { job: KeyJob; lock: string; sliceSize: number; logger: Logger },
    gated: boolean,
  ) {
    this.gatedFrom = gated;
  }

  /** Whether the run passes the limits before its claims (as last asked by `gatedNow`). */
  get gated(): boolean {
    return this.gatedFrom;
  }

  /**
   * Whether this run passes the limits from now on: once a limit is in force (or a batcher hold
   * heard), it passes them at each claim until its end, which gives back what it holds.
   */
  gatedNow(): boolean {
    if (!this.gatedFrom && this.limits.active()) this.gatedFrom = true;
    return this.gatedFrom;
  }

  /**
   * A lane's pass through the limits before its claim: how many ids it may claim, or the
   * refusal. It settles the lane's last reservation on the way.
   */
  async pass(lane: number): Promise<number | Refusal> {
    const { limits, run } = this;
    const { job } = run;
    const lease = `${run.lock}:${lane}`;
    const sentAt = performance.now();
    const entered = await limits.enter({
      lease,
      waiter: `${job.queueQualifiedName}|${job.id}`,
      level: Number(job.priority ?? 0),
      need: run.sliceSize,
      ...(this.reserved.has(lane) && { settle: this.reserved.get(lane) }),
    });
    this.reserved.delete(lane);
    if (entered.code !== 'ok') {
      this.leases.delete(lease);
      return entered;
    }
    if (limits.current().concurrency !== undefined) this.leases.add(lease);
    if (limits.current().rate) {
      this.reserved.set(lane, { at: entered.stamp, count: entered.granted });
      this.passSentAt.set(lane, sentAt);
    }
    return entered.granted;
  }

  /** A gated lane's claim took `n` ids: what its reservation did not use is given back at its next pass. */
  claimed(lane: number, n: number): void {
    const reservation = this.reserved.get(lane);
    if (reservation) this.reserved.set(lane, { at: reservation.at, count: reservation.count - n });
  }

  /**
   * `globalRateLimit` is promised at handler start, and the window enforced has a margin for the
   * delay from a reservation to its slice's start (see limits-protocol.ts `windowOf`). A slice
   * whose start comes later than that (a busy event loop held the pass's reply, or the claim's)
   * would start in one window with ids reserved just after its own expired: its `n` ids are
   * counted again now (limits-restamp.lua), and when the window has no room for them they wait
   * for it, unstarted, counted nowhere, until the run's `stop`. A reply late again is counted
   * again, a few times at most.
   */
  async onTime(lane: number, n: number, stop: Stop): Promise<void> {
    const { limits } = this;
    const rate = limits.current().rate;
    const reservation = this.reserved.get(lane);
    let since = this.passSentAt.get(lane);
    this.passSentAt.delete(lane);
    if (!rate || !reservation || since === undefined) return;
    // Stamps and starts are whole ms: a start a ms inside the margin may read as outside it.
    const margin = windowOf({ rate }) - rate.durationMs - CLOCK_GRAIN_MS;
    let at = reservation.at;
    for (let late = 0; late < MAX_RESTAMPS && performance.now() - since > margin;) {
      if (stop.aborted) return;
      since = performance.now();
      const { stamp, waitMs } = await limits.restamp(at, n);
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

  /** The run's end under the limits: its places go back, its reservations are settled (a failure is logged: the leases lapse by themselves). */
  async leave(): Promise<void> {
    const { run } = this;
    const settle = [...this.reserved.values()].filter((r) => r.count !== 0);
    const leases = [...this.leases];
    this.leases.clear();
    this.reserved.clear();
    await this.limits
      .leave({ leases, settle, need: run.sliceSize })
      .catch((err: unknown) => log(run.logger, 'warn', 'batch-by-key: could not give back global limits', { err }));
  }
}
