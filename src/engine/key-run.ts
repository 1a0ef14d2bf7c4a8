import { DelayedError } from '../bullmq';
import { fillOf } from '../core/fill';
import { log } from '../core/logger';
import type { CancelSource } from '../core/stop';
import type { KeyJob } from '../core/types';
import { levelsOf } from '../storage/job';
import type { KeySession } from '../storage/key-session';
import type { ClaimTransport, Opening } from './claims/transport';
import { nothingClaimed } from './decisions';
import { rateLimitOf } from './flow';
import { maxRuntime, Stop, stopped, type InterruptCheck } from './interrupt';
import { KeyLock } from './lock';
import type { RunEnv } from './run-env';
import { RunEnd } from './run/end';
import { Lanes } from './run/lanes';
import { RunLimits } from './run/limits';
import { sliceIdOf, type RunState, type Shed } from './run/state';
import { budgetOf, preemption } from './scheduling';

export type { Shed } from './run/state';

/**
 * One run of a key's BullMQ job: its start, here, then its lanes (run/lanes.ts, each slice run by
 * run/slice.ts) and its end (run/end.ts). The decisions are decisions.ts's, made from plain data.
 *
 * The run asks its claim transport (claims/transport.ts) how it opens: the lock value its first
 * claim takes the key with, and that claim itself when the fetch of its job made it (the fused
 * transport). Otherwise, after a pass through the batcher-wide limits (run/limits.ts), it makes
 * the first claim, which takes the key's lock and recovers what a dead run left in any lane. It
 * then runs `concurrency` lanes, each a loop that claims a slice (acking its previous one in the
 * same call), runs the handler, then asks the interrupt checks; a single lane's claim that likely
 * ends the run is asked of the transport too (its `last`, which may complete the job). Then it
 * concludes: complete (nothing left), or hand the key on to its next job, at once when
 * interrupted (so it lines up behind jobs already waiting), or once something is due (a zset
 * time, a failed slice's backoff). Progress is committed only after a slice succeeds, and the
 * budget is checked only between slices (as job-iteration does). A failed slice is settled on its
 * own (see failures.ts) and never fails the job; the job fails (BullMQ's own attempts are 1) only
 * when Redis is too broken even to hand the key on, and the recovery sweep brings such a key back.
 * @internal
 */
export class KeyRun {
  /** Its `key` is the run's: read from the job once, before any user code could change `ctx.job.data`. */
  private readonly session: KeySession;
  private readonly opening: Opening;
  private readonly end: RunEnd;

  constructor(
    private readonly env: RunEnv,
    private readonly claims: ClaimTransport,
    private readonly job: KeyJob,
    private readonly token: string,
    private readonly cancel: CancelSource | undefined,
    private readonly shed?: Shed,
  ) {
    const opening = (this.opening = claims.open(job));
    this.session = env.session(job.data.key, { value: opening.lock, ttlMs: env.options.lockTtlMs });
    this.end = new RunEnd(env, job, token, this.session);
  }

  async run(): Promise<void> {
    const { env, job, session, opening, end } = this;
    const { options } = env;
    const key = session.key;
    let lock: KeyLock | undefined;
    // A claim the fetch made (just before a limit came into force) stands.
    const limits = new RunLimits(
      env.limits,
      { job, lock: session.lock.value, sliceSize: options.sliceSize, logger: options.logger },
      !opening.claimed && env.limits.active(),
    );
    try {
      const rate = rateLimitOf(options.rateLimit, key);
      const fill = fillOf(options.fill, key, options.sliceSize);
      const count = limits.gated ? await limits.pass(0) : options.sliceSize;
      // A limit refused: the key hands its turn on before it takes anything (see global-limits.ts).
      if (typeof count !== 'number') return await end.requeue(count.waitMs);
      const single = options.concurrencyPerKey === 1;
      // Takes the lock, recovers what a dead run left in any lane, and claims the first slice.
      const first = opening.claimed
        ? await session.adopt(opening.claimed)
        : await session.claim({
            claimId: sliceIdOf(session.lock.value, 0, 1),
            settle: 'recover',
            count,
            takeLock: true,
            releaseIfEmpty: single,
            ...(rate && { rate }),
            ...(fill && { fill }),
          });
      limits.claimed(0, first.held ? first.ids.length : 0);
      // Another run still holds the key (a stalled worker, or a crashed one until its TTL ends).
      if (!first.held) return await end.busy(first.lockTtlMs);
      // Nothing to do (a job whose ids an earlier run took): that claim released the lock already,
      // so there is nothing to renew or iterate.
      if (first.ids.length === 0 && single) return await end.conclude(nothingClaimed(first.waitMs, true), fill);
      const handler = env.handler();
      const stop = new Stop(this.cancel);
      lock = new KeyLock(env.redlock, session.names.lock, session.lock.value, opening.sentAt, options.lockTtlMs, options.logger, stop);
      const state: RunState = {
        env,
        job,
        token: this.token,
        session,
        claims: this.claims,
        limits,
        shed: this.shed,
        handler,
        stop,
        rate,
        fill,
        interrupts: this.interrupts(stop),
      };
      const outcome = await new Lanes(state).outcome(first);
      // No renewal may race the release below (it would fail and log a spurious warning).
      lock.stop();
      await end.conclude(outcome, fill);
    } catch (err) {
      if (err instanceof DelayedError) throw err;
      // Redis trouble outside a slice (or a rateLimit, minSliceSize or maxWaitMs function that
      // threw). Failing the job would leave the key to the recovery sweep; retrying it is better.
      log(options.logger, 'warn', 'batch-by-key: run interrupted by an error; retrying the key', { err, key });
      lock?.stop();
      return await end.afterError(err, lock?.expiresAt ?? opening.sentAt + options.lockTtlMs);
    } finally {
      lock?.stop();
      if (limits.gated) await limits.leave();
    }
  }

  /** The checks asked between slices: the run's stop, its budget, and under fair scheduling a lighter key waiting. */
  private interrupts(stop: Stop): InterruptCheck[] {
    const { env, job, session } = this;
    const { options } = env;
    return [
      stopped(stop),
      maxRuntime(Date.now(), budgetOf(session.key, options.maxRuntimeMs, options.weight, options.logger)),
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
  }
}
