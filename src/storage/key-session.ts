import {
  claimWith,
  dueIn,
  failSlice,
  release,
  settle,
  type ClaimArgs,
  type ClaimResult,
  type FailPlan,
  type LockRef,
  type Released,
  type SettleCall,
} from './protocol';
import type { KeyNames } from './keys';
import type { RedisClient } from './scripts';
import type { TicketOutbox } from './ticket-outbox';
import type { Fill } from '../core/fill';
import type { Key, StoreKind } from '../core/types';

/** What every session of a worker shares: built once (see engine/run-env.ts). */
export interface SessionEnv {
  readonly client: RedisClient;
  readonly store: StoreKind;
  readonly outbox: TicketOutbox;
}

/**
 * One key's protocol for one run: the verbs of protocol.ts bound to the client, the store, the
 * key's names and the run's lock, so that every write the run makes is fenced by that lock in
 * its script. Whatever a verb settles is handed to the `TicketOutbox` here, on one path: a claim's
 * ack, a settled slice, a failed one, a release. The exception is a claim that completed the
 * run's BullMQ job: its tickets are the run's to hand, after the completion (see engine/key-run.ts).
 * @internal
 */
export class KeySession {
  constructor(
    private readonly env: SessionEnv,
    readonly key: Key,
    readonly names: KeyNames,
    readonly lock: LockRef,
  ) {}

  /** Settles the lane's previous slice and claims the next (see protocol.ts `claim`). */
  async claim(c: ClaimArgs): Promise<ClaimResult> {
    const { env } = this;
    const claimed = await claimWith(env.client, env.store, this.names, this.lock, c);
    if (claimed.held && claimed.settled && claimed.finished === undefined) await env.outbox.hand(this.key, claimed.settled);
    return claimed;
  }

  /** A claim made for this run elsewhere (the fetch of its job, see engine/claims/fused.ts): what it settled is handed as a claim's. */
  async adopt(claimed: ClaimResult): Promise<ClaimResult> {
    if (claimed.held && claimed.settled) await this.env.outbox.hand(this.key, claimed.settled);
    return claimed;
  }

  /** Acks or restores a lane's last slice (and holds the key `holdMs`): how long it is held, or undefined when the lock is lost. */
  async settle(s: SettleCall): Promise<number | undefined> {
    const { env } = this;
    const settled = await settle(env.client, env.store, this.names, this.lock, s);
    if (!settled) return undefined;
    await env.outbox.hand(this.key, settled.settled);
    return settled.heldMs;
  }

  /** Releases the lock, acking the slice in flight or keeping it for the next run (see protocol.ts `release`). */
  async release(mode: 'ack' | 'keep'): Promise<Released> {
    const { released, settled } = await release(this.env.client, this.names, this.lock.value, mode);
    await this.env.outbox.hand(this.key, settled);
    return released;
  }

  /** Settles a failed slice of a lane by its plan, once per `settleId`: false when the lock is lost. */
  async fail(f: { lane: number; plan: FailPlan; maxTicketErrors: number; settleId: string }): Promise<boolean> {
    const settled = await failSlice(this.env.client, this.names, f.lane, this.lock.value, f.plan, f.maxTicketErrors, f.settleId);
    if (!settled) return false;
    await this.env.outbox.hand(this.key, settled);
    return true;
  }

  /** Ms until the key has something to claim (waiting `fill`, if given); -1 for nothing at all. */
  async dueIn(fill?: Fill): Promise<number> {
    return dueIn(this.env.client, this.env.store, this.names, fill);
  }
}
