/**
 * The batcher-wide limits' protocol (see engine/global-limits.ts): one verb per script
 * limits-*.lua, each building its key array from the names keys.ts gives. Every key is in the
 * batcher's own slot (the dead letters'), so on a Cluster these are calls of their own, made
 * beside a key's claim, never inside it.
 */
import type { RateLimit } from '../core/types';
import type { LimitNames } from './keys';
import { enforcedWindowMs } from './protocol';
import { callScript, runScript, type RedisClient } from './scripts';

/** The names in the order includes/global-limits.lua `limitNames` reads them. */
export function limitKeys(n: LimitNames): string[] {
  return [n.leases, n.waiters, n.waitersUntil, n.waitersSince, n.waitSeq, n.rateLog, n.rateUsed, n.hold, n.counters, n.rateWaiters];
}

/** The batcher-wide limits in force. */
export interface LimitsInForce {
  rate?: RateLimit;
  concurrency?: number;
}

/**
 * The shared window as enforced: `durationMs` and a margin, the per-key `rateLimit`'s (see
 * protocol.ts `enforcedWindowMs`). The limit is promised at handler start, a few ms after the
 * reservation (more than the per-key claim's: a pass's reply, then the claim's round trip); a
 * slice that starts later than the margin is counted again as it starts (limits-restamp.lua).
 */
export function windowOf(limits: LimitsInForce): number {
  return limits.rate ? enforcedWindowMs(limits.rate) : 0;
}

/** A reservation of the shared rate window: when it was made, and how many of its ids went unclaimed (negative: claimed beyond it). */
export interface Unclaimed {
  at: number;
  count: number;
}

export interface EnterCall {
  lease: string;
  waiter: string;
  level: number;
  need: number;
  leaseTtlMs: number;
  waitBoundMs: number;
  settle?: Unclaimed;
}

/** limits-enter.lua's answer. */
export type Entered =
  | { code: 'ok'; granted: number; stamp: number; wake: string[] }
  | { code: 'held' | 'rate' | 'full' | 'yield'; waitMs: number; wake: string[] };

/** A lane's pass through the limits before it claims (see limits-enter.lua). */
export async function enterLimits(client: RedisClient, names: LimitNames, limits: LimitsInForce, c: EnterCall): Promise<Entered> {
  const reply = (await callScript(client, 'limits-enter', limitKeys(names), {
    lease: c.lease,
    waiter: c.waiter,
    level: c.level,
    cap: limits.concurrency ?? 0,
    leaseTtlMs: c.leaseTtlMs,
    waitBoundMs: c.waitBoundMs,
    need: c.need,
    rateMax: limits.rate?.max ?? 0,
    rateWindowMs: windowOf(limits),
    settleAt: c.settle?.at ?? 0,
    settleCount: c.settle?.count ?? 0,
  })) as [string, number, number, number, ...string[]];
  const [code, granted, waitMs, stamp, ...wake] = reply;
  if (code === 'ok') return { code, granted: Number(granted), stamp: Number(stamp), wake };
  return { code: code as 'held' | 'rate' | 'full' | 'yield', waitMs: Number(waitMs), wake };
}

/** A run's end (see limits-leave.lua): its leases, its reservations to settle, and what a pass of its reserves. */
export interface LeaveCall {
  leases: readonly string[];
  settle: readonly Unclaimed[];
  need: number;
}

/** Gives back a run's leases and settles its reservations (see limits-leave.lua): the waiters to wake. */
export async function leaveLimits(client: RedisClient, names: LimitNames, limits: LimitsInForce, c: LeaveCall): Promise<string[]> {
  const pairs = c.settle.map((s) => `${s.at} ${s.count}`).join(' ');
  const wake = await callScript(
    client,
    'limits-leave',
    limitKeys(names),
    {
      cap: limits.concurrency ?? 0,
      rateMax: limits.rate?.max ?? 0,
      rateWindowMs: windowOf(limits),
      need: c.need,
      settle: pairs,
    },
    c.leases,
  );
  return wake as string[];
}

/**
 * The limits changed (see limits-changed.lua): every key job waiting for a limit, to wake (a stale
 * entry's wake is refused), with the waiters of a limit now off forgotten.
 */
export async function limitsChanged(client: RedisClient, names: LimitNames, limits: LimitsInForce): Promise<string[]> {
  return (await runScript(client, 'limits-changed', limitKeys(names), [limits.concurrency ?? 0, limits.rate?.max ?? 0])) as string[];
}

/** A late slice's ids, counted again now (see limits-restamp.lua): their new stamp, or 0 and how long to wait. */
export async function restampLimits(
  client: RedisClient,
  names: LimitNames,
  rate: RateLimit,
  at: number,
  n: number,
): Promise<{ stamp: number; waitMs: number }> {
  const [stamp, waitMs] = (await runScript(client, 'limits-restamp', limitKeys(names), [
    at,
    n,
    rate.max,
    enforcedWindowMs(rate),
  ])) as number[];
  return { stamp: Number(stamp), waitMs: Number(waitMs) };
}

/** Renews leases (see limits-renew.lua). */
export async function renewLeases(client: RedisClient, names: LimitNames, ttlMs: number, leases: readonly string[]): Promise<void> {
  await runScript(client, 'limits-renew', [names.leases], [ttlMs, ...leases]);
}

/** Holds every key `ms` (see limits-hold.lua). */
export async function holdBatcher(client: RedisClient, names: LimitNames, ms: number): Promise<number> {
  return Number(await runScript(client, 'limits-hold', [names.hold], [ms]));
}

/** What the limits' keys hold now (see limits-read.lua). */
export interface LimitsUse {
  running: number;
  waiting: number;
  idsInWindow: number;
  holdMs: number;
  waitedMs: number;
  waits: number;
}

export async function readLimits(client: RedisClient, names: LimitNames, windowMs: number): Promise<LimitsUse> {
  const [running, waiting, idsInWindow, holdMs, waitedMs, waits] = (await runScript(client, 'limits-read', limitKeys(names), [
    windowMs,
  ])) as number[];
  return {
    running: running!,
    waiting: waiting!,
    idsInWindow: idsInWindow!,
    holdMs: holdMs!,
    waitedMs: waitedMs!,
    waits: waits!,
  };
}
