import { InvalidOptionError } from '../core/errors';
import { log } from '../core/logger';
import { integer } from '../core/validate';
import type { Logger } from '../core/types';
import type { LimitNames } from '../storage/keys';
import {
  allWaiters,
  enterLimits,
  holdBatcher,
  leaveLimits,
  renewLeases,
  type EnterCall,
  type Entered,
  type LeaveCall,
  type LimitsInForce,
} from '../storage/limits-protocol';
import type { RedisClient } from '../storage/scripts';
import { validateRateLimit } from './flow';

/** `globalConcurrency` at most. */
export const MAX_GLOBAL_CONCURRENCY = 1_000_000;

/**
 * The longest a key refused by a limit waits before it asks again, woken or not. A key refused a
 * place under the cap is woken when one frees (see `wake`), so this only bounds the rare cases no
 * wake reaches: a place that frees as its worker dies (its lease lapses), a waiter in a queue of
 * a shard count this process does not serve.
 */
export const LIMIT_RECHECK_MS = 1_000;

/**
 * While a limit is in force, each process reads the config hash again at most this often (on a
 * run, no timer), so a change or a removal reaches every worker within about this. A limit set
 * where none was reaches a worker at its next store check (at most `recoveryIntervalMs`), or at
 * once in the process that set it.
 */
const LIMITS_REFRESH_MS = 1_000;

/** Checks `globalRateLimit` and `globalConcurrency`; `where` prefixes their names in the error. */
export function validateGlobalLimits(rate: unknown, concurrency: unknown, where = 'options.'): LimitsInForce {
  return {
    ...(rate !== undefined && { rate: validateRateLimit(rate, `${where}globalRateLimit`) }),
    ...(concurrency !== undefined && { concurrency: validateGlobalConcurrency(concurrency, `${where}globalConcurrency`) }),
  };
}

export function validateGlobalConcurrency(n: unknown, where: string): number {
  if (n === undefined) throw new InvalidOptionError(`${where} must be an integer between 1 and ${MAX_GLOBAL_CONCURRENCY}, got undefined`);
  return integer(where, n, 0, 1, MAX_GLOBAL_CONCURRENCY);
}

export interface GlobalLimitsDeps {
  client: () => RedisClient;
  names: LimitNames;
  /** A lease lasts this long unless renewed: the lock's TTL, the crash bound. */
  lockTtlMs: number;
  logger: Logger;
  /** Reads the limits the config hash holds; undefined when it holds no record (lost with Redis's data). */
  read: () => Promise<LimitsInForce | undefined>;
  /** Promotes a waiter's delayed job, `${queue}|${jobId}` (see limits-enter.lua). */
  wake: (waiter: string) => Promise<void>;
}

/**
 * The batcher-wide limits as one process follows them: `globalRateLimit`, a sliding window of
 * ids shared by every key and worker, and `globalConcurrency`, a set of leases, one per running
 * lane. Both live in the batcher's own slot; a lane passes them (limits-enter.lua) in a call of
 * its own just before its claim, because on a Cluster a key's claim cannot touch another slot.
 * So the rate limit is a reservation: the lane reserves up to a slice of ids from the window,
 * claims at most that many, and gives back what it did not claim with its next pass (or its
 * run's end). A lane refused hands its turn on: its run ends and its job waits, holding no worker
 * slot; refused a place, it waits as a waiter, lightest level first, and is woken when one frees.
 * A lane holding a place gives it up to a lighter waiter at its next pass, so light keys still go
 * first. Nothing here runs, and no call is made, while no limit is in force.
 * @internal
 */
export class GlobalLimits {
  private inForce: LimitsInForce;
  /** Until when this process knows the batcher is held (a handler's `retryAfter` with scope 'batcher'). */
  private heldUntil = 0;
  private refreshedAt = Date.now();
  private refreshing: Promise<void> | undefined;
  /** This process's lanes' leases, renewed as long as they are held. */
  private readonly leases = new Set<string>();
  private renewal: NodeJS.Timeout | undefined;

  constructor(
    private readonly deps: GlobalLimitsDeps,
    defaults: LimitsInForce,
  ) {
    this.inForce = defaults;
  }

  /** What the config hash holds, as a store check or a refresh read it. */
  heard(limits: LimitsInForce): void {
    this.inForce = limits;
    this.refreshedAt = Date.now();
  }

  current(): LimitsInForce {
    return this.inForce;
  }

  /** Whether runs pass the limits now (a run decides once, at its start). */
  active(): boolean {
    if (this.stale()) void this.refresh();
    return this.inForceNow();
  }

  /**
   * A limit changed by this process: every waiter asks again, now (this process follows the
   * change at once) and once every worker has read it (LIMITS_REFRESH_MS), so a key refused
   * under a window of a minute runs once the limit is raised or off, not a minute later.
   */
  changed(): void {
    const wakeAll = (): void => {
      allWaiters(this.deps.client(), this.deps.names)
        .then((waiters) => this.wakeAll(waiters))
        .catch((err: unknown) => log(this.deps.logger, 'debug', 'batch-by-key: could not wake the keys waiting for a limit', { err }));
    };
    wakeAll();
    setTimeout(wakeAll, LIMITS_REFRESH_MS + 100).unref();
  }

  private stale(): boolean {
    const { rate, concurrency } = this.inForce;
    return (rate !== undefined || concurrency !== undefined) && Date.now() - this.refreshedAt > LIMITS_REFRESH_MS;
  }

  private inForceNow(): boolean {
    const { rate, concurrency } = this.inForce;
    return rate !== undefined || concurrency !== undefined || Date.now() < this.heldUntil;
  }

  /** A lane's pass before its claim (see limits-enter.lua); waiters it freed a place for are woken. */
  async enter(call: Omit<EnterCall, 'leaseTtlMs' | 'waitBoundMs'>): Promise<Entered> {
    const limits = this.inForce;
    const entered = await enterLimits(this.deps.client(), this.deps.names, limits, {
      ...call,
      leaseTtlMs: this.deps.lockTtlMs,
      waitBoundMs: LIMIT_RECHECK_MS,
    });
    if (entered.code === 'ok' && limits.concurrency !== undefined) this.keep(call.lease);
    else this.leases.delete(call.lease);
    this.wakeAll(entered.wake);
    return entered;
  }

  /** A run's end: gives back its lanes' places and settles their reservations, then wakes whom that let in. */
  async leave(call: LeaveCall): Promise<void> {
    for (const lease of call.leases) this.leases.delete(lease);
    if (call.leases.length === 0 && call.settle.length === 0) return;
    this.wakeAll(await leaveLimits(this.deps.client(), this.deps.names, this.inForce, call));
  }

  /** `ctx.retryAfter(ms, { scope: 'batcher' })`: holds every key of the batcher for `ms`. */
  async hold(ms: number): Promise<void> {
    this.heldUntil = Math.max(this.heldUntil, Date.now() + ms);
    await holdBatcher(this.deps.client(), this.deps.names, ms);
  }

  private keep(lease: string): void {
    this.leases.add(lease);
    if (this.renewal) return;
    const every = Math.max(1, Math.floor(this.deps.lockTtlMs / 3));
    this.renewal = setInterval(() => {
      if (this.leases.size === 0) {
        clearInterval(this.renewal);
        this.renewal = undefined;
        return;
      }
      // A renewal that fails (a closed batcher's client throws) is tried again next tick; a lease
      // that lapses meanwhile is asked for again at its lane's next pass.
      Promise.resolve()
        .then(() => renewLeases(this.deps.client(), this.deps.names, this.deps.lockTtlMs, [...this.leases]))
        .catch((err: unknown) => log(this.deps.logger, 'warn', 'batch-by-key: could not renew global concurrency leases', { err }));
    }, every).unref();
  }

  private wakeAll(waiters: readonly string[]): void {
    for (const waiter of waiters) {
      // A waiter not woken asks again within LIMIT_RECHECK_MS.
      this.deps.wake(waiter).catch((err: unknown) => log(this.deps.logger, 'debug', 'batch-by-key: could not wake a waiting key', { err }));
    }
  }

  private refresh(): void {
    this.refreshing ??= Promise.resolve()
      .then(() => this.deps.read())
      // A record lost with Redis's data is no limit turned off: the limits stand until a store
      // check records them again, or a cap would be lifted for up to recoveryIntervalMs.
      .then((limits) => this.heard(limits ?? this.inForce))
      .catch((err: unknown) => log(this.deps.logger, 'debug', 'batch-by-key: could not read the global limits', { err }))
      .finally(() => (this.refreshing = undefined));
  }
}
