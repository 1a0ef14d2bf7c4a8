import type { Finished } from '../decisions';
import type { KeySession } from '../../storage/key-session';
import type { ClaimArgs, ClaimResult } from '../../storage/protocol';
import type { KeyJob } from '../../core/types';
import { KeyLock } from '../lock';

/**
 * How a run starts: the lock value its first claim takes the key with, when that claim was (or
 * is) sent, and the claim itself when its job's fetch made it already (on the fused transport;
 * none when that claim failed in Redis: the run makes its own, with the same lock value, in case
 * the failed one took the lock).
 */
export interface Opening {
  lock: string;
  sentAt: number;
  claimed?: ClaimResult;
}

/** A run's last claim that completed its job as well: the tickets its ack settled, to hand once the job is complete. */
export interface Completed {
  completed: Finished;
}

/**
 * Where a run's first and last claims are made: with its own calls (`PlainClaims`), or fused into
 * BullMQ's fetch and completion of its job (`FusedClaims`, engine/claims/fused.ts), so that a run
 * of one slice is one round trip. Every other claim is the run's own, through its session.
 */
export interface ClaimTransport {
  /** How the run of `job` starts (see `Opening`). */
  open(job: KeyJob): Opening;
  /**
   * A single-lane run's claim that likely ends it (its previous one left nothing pending): `call`,
   * made through `session`; on the fused transport it completes `job` too when it ends the run
   * (nothing claimed, nothing due later), and then BullMQ's completion of the job sends nothing.
   */
  last(session: KeySession, call: ClaimArgs, job: KeyJob, token: string): Promise<ClaimResult | Completed>;
}

/** A run's claims all made with its own calls: a worker of the caller's (`processor()`), on a Cluster, or with `fastPath: 'off'`. */
export const PLAIN_CLAIMS: ClaimTransport = {
  open: () => ({ lock: KeyLock.newValue(), sentAt: Date.now() }),
  last: (session, call) => session.claim(call),
};
