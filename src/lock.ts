import Redlock, { type Lock } from 'redlock';
import { LockLostError } from './errors';
import { log } from './logger';
import type { RedisClient } from './scripts';
import type { Logger } from './types';

/** Renew this many times per TTL, so one or two failed renewals still leave time for another. */
const RENEWALS_PER_TTL = 3;

export type Acquired = { held: true; lock: KeyLock } | { held: false; retryInMs: number };

/**
 * The per-key lock: a redlock lock with our own renewal loop (not `redlock.using`, whose timer
 * crashes on an already-expired lock and only aborts after a failed extension). The lock's
 * value is also the fencing token every slice commit checks in Lua.
 */
export class KeyLock {
  private readonly controller = new AbortController();
  private timer: NodeJS.Timeout | undefined;
  private stopped = false;

  private constructor(
    private lock: Lock,
    private readonly ttlMs: number,
    private readonly logger: Logger,
  ) {
    this.schedule();
  }

  /** Takes the lock, or says how long its current holder keeps it. Never waits. */
  static async acquire(
    redlock: Redlock,
    client: RedisClient,
    resource: string,
    ttlMs: number,
    logger: Logger,
  ): Promise<Acquired> {
    try {
      const lock = await redlock.acquire([resource], ttlMs, { retryCount: 0 });
      return { held: true, lock: new KeyLock(lock, ttlMs, logger) };
    } catch (err) {
      // Held by someone else, or Redis is unreachable: PTTL tells which (and throws in the latter case).
      const pttl = await client.pttl(resource);
      if (pttl === -2) return { held: false, retryInMs: 0 }; // released just now
      if (pttl === -1) {
        log(logger, 'warn', 'batch-by-key: lock key has no TTL (set by hand?); delete it to unblock the key', { resource, err });
        return { held: false, retryInMs: ttlMs };
      }
      return { held: false, retryInMs: pttl };
    }
  }

  /** The fencing token. */
  get value(): string {
    return this.lock.value;
  }

  /** Aborted with a LockLostError once the lock can no longer be renewed. */
  get signal(): AbortSignal {
    return this.controller.signal;
  }

  /** Stops renewing; the lock itself is released (fenced) by the release script. */
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
      if (Date.now() >= this.lock.expiration) {
        this.controller.abort(new LockLostError(`lock ${this.lock.resources[0]} expired before it could be renewed`));
        this.stop();
        return;
      }
      log(this.logger, 'warn', 'batch-by-key: lock renewal failed; retrying', { err, resource: this.lock.resources[0] });
    }
    this.schedule();
  }
}
