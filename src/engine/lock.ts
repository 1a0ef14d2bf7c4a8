import { randomUUID } from 'node:crypto';
import Redlock, { Lock } from 'redlock';
import { LockLostError } from '../core/errors';
import { log } from '../core/logger';
import type { Stop } from '../core/stop';
import type { Logger } from '../core/types';

/** Renew this many times per TTL, so one or two failed renewals still leave time for another. */
const RENEWALS_PER_TTL = 3;

/** Redlock's default clock drift allowance: a lock counts as expired this share of its TTL early (plus 2 ms). */
const DRIFT_FACTOR = 0.01;

/**
 * The per-key lock: a redlock lock (a TTL key whose random value is the fencing token every
 * slice commit checks in Lua) with our own renewal loop (not `redlock.using`, whose timer crashes
 * on an already-expired lock and only aborts after a failed extension).
 *
 * It is taken by the run's first claim (settle-previous.lua sets the same key, value and TTL that
 * redlock's acquire would) rather than by `redlock.acquire`: a separate acquire is one more round
 * trip and one more script per key cycle, and with many small keys the cycle is the cost that
 * matters. Renewals go through redlock's `extend`, which checks the value as its acquire would.
 */
export class KeyLock {
  private timer: NodeJS.Timeout | undefined;
  private stopped = false;
  private lock: Lock;

  /**
   * The lock a run's first claim took with `value`; `sentAt` is when that claim was sent, so the
   * lock's expiration is counted, as redlock counts it, from before it was set. `run` (the run's
   * stop) is aborted with a LockLostError once the lock can no longer be renewed.
   */
  constructor(
    redlock: Redlock,
    resource: string,
    value: string,
    sentAt: number,
    readonly ttlMs: number,
    private readonly logger: Logger,
    private readonly run: Stop,
  ) {
    this.lock = new Lock(redlock, [resource], value, [], sentAt + ttlMs - (Math.round(DRIFT_FACTOR * ttlMs) + 2));
    this.schedule();
  }

  /** A new fencing token: 122 random bits (redlock's own are 128), from Node's cached entropy. */
  static newValue(): string {
    return randomUUID();
  }

  /** The fencing token. */
  get value(): string {
    return this.lock.value;
  }

  /** When the lock expires unless renewed (redlock's count: drift taken off). */
  get expiresAt(): number {
    return this.lock.expiration;
  }

  /** Stops renewing; the lock itself is released, fenced, by the claim that finds nothing or by `release` (protocol.ts). */
  stop(): void {
    this.stopped = true;
    clearTimeout(this.timer);
  }

  private schedule(): void {
    if (this.stopped) return;
    this.timer = setTimeout(() => void this.renew(), Math.floor(this.ttlMs / RENEWALS_PER_TTL));
  }

  private async renew(): Promise<void> {
    try {
      this.lock = await this.lock.extend(this.ttlMs);
    } catch (err) {
      // The run's last claim released the lock while this renewal was on its way: nothing is wrong.
      if (this.stopped) return;
      if (Date.now() >= this.lock.expiration) {
        this.stop();
        this.run.abort(new LockLostError(`lock ${this.lock.resources[0]} expired before it could be renewed`));
        return;
      }
      log(this.logger, 'warn', 'batch-by-key: lock renewal failed; retrying', { err, resource: this.lock.resources[0] });
    }
    this.schedule();
  }
}
