import { InvalidOptionError } from '../core/errors';
import { log } from '../core/logger';
import { integer } from '../core/validate';
import type { Logger } from '../core/types';
import type { LimitNames } from '../storage/keys';
import {
  enterLimits,
  holdBatcher,
  leaveLimits,
  limitsChanged,
  renewLeases,
  restampLimits,
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
 * While a limit is in force, each worker process reads the config hash again this often (on a
 * timer, so a worker whose keys all wait hears it too), so a change or a removal made anywhere
 * (another process, the CLI, which exits at once) reaches every worker within about this, and
 * the worker that hears it wakes the waiting keys. A limit set where none was reaches a worker
 * at its next store check (at most `recoveryIntervalMs`), or at once in the process that set it.
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
  /** Set once this process runs keys under the limits (it asked `active`): it re-reads them on a timer, and wakes waiters on a change. */
  private serving = false;
  private refresher: NodeJS.Timeout | undefined;
  /** This process's lanes' leases, renewed as long as they are held. */
  private readonly leases = new Set<string>();
  private renewal: NodeJS.Timeout | undefined;

  constructor(
    private readonly deps: GlobalLimitsDeps,
    defaults: LimitsInForce,
  ) {
    this.inForce = defaults;
  }

  /**
   * What the config hash holds, as a store check or a refresh read it. A worker that hears a
   * change wakes every waiting key and forgets the waiters of a limit now off (see `changed`):
   * the process that made the change may be gone (the CLI), or not run keys at all.
   */
  heard(limits: LimitsInForce): void {
    const before = this.inForce;
    this.inForce = limits;
    this.refreshedAt = Date.now();
    if (this.serving && !sameLimits(before, limits)) this.reconcile();
  }

  current(): LimitsInForce {
    return this.inForce;
  }

  /** Whether runs pass the limits now (a run asks before each claim: a local read). */
  active(): boolean {
    this.serving = true;
    if (this.stale()) this.refresh();
    this.followChanges();
    return this.inForceNow();
  }

  /**
   * A limit changed by this process (which `heard` it just before): a process that runs no key
   * wakes the waiters itself, at once; every worker wakes them again as it hears the change
   * (`heard`), within LIMITS_REFRESH_MS, so a key refused under a window of a minute runs once
   * the limit is raised or off, not a minute later, even when this process exits at once.
   */
  changed(): void {
    if (!this.serving) this.reconcile();
  }

  /** The batcher closes: no more reads on a timer. */
  stop(): void {
    clearInterval(this.refresher);
    this.refresher = undefined;
  }

  /** Wakes every waiting key and forgets the waiters of a limit now off (see limits-changed.lua). */
  private reconcile(): void {
    Promise.resolve()
      .then(() => limitsChanged(this.deps.client(), this.deps.names, this.inForce))
      .then((waiters) => this.wakeAll(waiters))
      .catch((err: unknown) => log(this.deps.logger, 'debug', 'batch-by-key: could not wake the keys waiting for a limit', { err }));
  }

  /**
   * While a limit is in force, a worker reads the limits again every LIMITS_REFRESH_MS on a timer:
   * reads on a run alone missed a change made while every key waited (none runs to read it).
   */
  private followChanges(): void {
    if (this.refresher || !this.limited()) return;
    this.refresher = setInterval(() => {
      if (this.limited()) return this.refresh();
      this.stop();
    }, LIMITS_REFRESH_MS).unref();
  }

  private limited(): boolean {
    return this.inForce.rate !== undefined || this.inForce.concurrency !== undefined;
  }

  private stale(): boolean {
    return this.limited() && Date.now() - this.refreshedAt > LIMITS_REFRESH_MS;
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

  /**
   * A slice that starts late: its `n` ids, reserved at `at` (0: counted nowhere), are counted
   * again now (see limits-restamp.lua); their new stamp, or 0 and how long to wait for room.
   */
  async restamp(at: number, n: number): Promise<{ stamp: number; waitMs: number }> {
    const { rate } = this.inForce;
    // The limit turned off meanwhile: nothing to count the slice against.
    if (!rate) return { stamp: Date.now(), waitMs: 0 };
    return restampLimits(this.deps.client(), this.deps.names, rate, at, n);
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

/** Whether two reads of the limits say the same. */
function sameLimits(a: LimitsInForce, b: LimitsInForce): boolean {
  return a.concurrency === b.concurrency && a.rate?.max === b.rate?.max && a.rate?.durationMs === b.rate?.durationMs;
}
