import { claim, type Settle } from './store';
import type { KeyNames } from './keys';
import type { KeyLock } from './lock';
import { firstReason, type InterruptCheck } from './interrupt';
import type { RedisClient } from './scripts';
import type { EachIteration, IterationContext, StopReason, StoreKind } from './types';

/** How one job run ended, when it did not throw. */
export type RunOutcome =
  /** No id left: the last slice is acked. */
  | { kind: 'drained' }
  /** zset: ids are pending but none is ready for `waitMs`; the last slice is acked. */
  | { kind: 'waiting'; waitMs: number }
  /** Stopped between slices; the last slice is done but not yet acked (release acks it). */
  | { kind: 'stopped'; reason: StopReason }
  /** The lock was lost; nothing can be acked, the in-flight ids wait for the next holder. */
  | { kind: 'lock_lost' };

export interface IterationParams {
  client: RedisClient;
  store: StoreKind;
  names: KeyNames;
  lock: KeyLock;
  sliceSize: number;
  handler: EachIteration;
  ctx: IterationContext;
  interrupts: readonly InterruptCheck[];
  /** Called once, after the first slice of the run succeeds. */
  onFirstSuccess?: () => Promise<void>;
}

/**
 * The loop of one job run: claim a slice (acking the previous one in the same call), run the
 * handler, then ask the interrupt checks. Progress is committed only after a slice succeeds,
 * and the budget is checked only between slices (as job-iteration does).
 * The first claim of a run restores ids a crashed run left in flight.
 */
export async function iterate(p: IterationParams): Promise<RunOutcome> {
  let settle: Settle = 'restore';
  for (let n = 1; ; n++) {
    const claimed = await claim(p.client, p.store, p.names, p.lock.value, `${p.lock.value}:${n}`, settle, p.sliceSize);
    if (!claimed.held) return { kind: 'lock_lost' };
    if (claimed.ids.length === 0) {
      return claimed.waitMs > 0 ? { kind: 'waiting', waitMs: claimed.waitMs } : { kind: 'drained' };
    }
    await p.handler(claimed.ids, p.ctx);
    if (n === 1) await p.onFirstSuccess?.();
    settle = 'ack';
    const reason = firstReason(p.interrupts);
    if (reason === 'lock_lost') return { kind: 'lock_lost' };
    if (reason) return { kind: 'stopped', reason };
  }
}
