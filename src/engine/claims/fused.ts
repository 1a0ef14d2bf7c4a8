import { fetchKeyCount, fetchReplyOf, FinishCalls, routeFetches, splitCall, type RedisQueueBackend } from '../../bullmq';
import { sharedFill } from '../../core/fill';
import type { KeySession } from '../../storage/key-session';
import { claimResult, fetch, type ClaimArgs, type ClaimResult, type FirstClaimConfig } from '../../storage/protocol';
import type { RedisClient } from '../../storage/scripts';
import type { KeyJob } from '../../core/types';
import { KeyLock } from '../lock';
import type { RunOptions } from '../run-options';
import { PLAIN_CLAIMS, type ClaimTransport, type Completed, type Opening } from './transport';

/** First claims kept at most: far more than a worker's concurrency. */
const MAX_FIRSTS = 10_000;

/**
 * Where a fetch claims for the keys it fetches: our client, what a first claim needs, and the
 * worker's store agreement (a worker on another store than the pushers' must touch no key).
 */
export interface Fusion {
  client: () => RedisClient;
  config: FirstClaimConfig;
  agree: () => Promise<void>;
  /** While batcher-wide limits are in force, no claim is fused: a run passes them before each claim (see global-limits.ts). */
  limited: () => boolean;
}

/**
 * What a fetch needs to make a run's first claim, or undefined when that claim's arguments are
 * not the same for every key: with a rateLimit function of the key, or a minSliceSize or
 * maxWaitMs function, runs make their own.
 */
export function firstClaimConfig(options: RunOptions, root: string): FirstClaimConfig | undefined {
  const fill = sharedFill(options.fill, options.sliceSize);
  if (typeof options.rateLimit === 'function' || fill === 'per-key') return undefined;
  return {
    store: options.store,
    root,
    sliceSize: options.sliceSize,
    lockTtlMs: options.lockTtlMs,
    singleLane: options.concurrencyPerKey === 1,
    rate: options.rateLimit,
    fill,
  };
}

/**
 * The fused claim transport of one worker: its runs' first and last claims ride on BullMQ's own
 * calls, so that in steady state a run of one slice is one round trip, as a BullMQ job is:
 * - a fetch (BullMQ's moveToActive) also takes the fetched key's lock and claims its first slice
 *   (fetch-and-claim.lua, see `fetched`), and the run opens with that claim (`open`) instead of
 *   sending its own;
 * - the claim that ends a run (nothing left) also completes its job with BullMQ's own
 *   moveToFinished (`last`), which fetches the next job, and claims that job's first slice too.
 *   When the processor returns, BullMQ completes the job as usual, and its backend answers with
 *   the claim's reply instead of sending it (bullmq/fused-path.ts `FinishCalls`).
 *
 * Only for workers made by `createWorker` on a standalone Redis whose BullMQ is the one this was
 * written for (see backend.ts): until the worker's backend is fused (`fuse`), its runs' claims are
 * plain. Fetches claim only with a `fusion` (see `firstClaimConfig`), once the worker's store
 * agreement holds.
 */
export class FusedClaims implements ClaimTransport {
  private finishes: FinishCalls | undefined;
  private worker: { mayFetchNext(token: string): boolean } | undefined;
  /** First claims made by the fetch of their job, by job id, until the job's run opens. */
  private readonly firsts = new Map<string, Opening>();

  constructor(private readonly fusion?: Fusion) {}

  /** The worker whose runs these are (it decides whether a completion fetches a next job). */
  serve(worker: { mayFetchNext(token: string): boolean }): void {
    this.worker = worker;
  }

  /** Fuses runs into `backend`'s fetches and completions (see the class). */
  fuse(backend: RedisQueueBackend): void {
    this.finishes = new FinishCalls(backend);
    routeFetches(backend, (flat, send) => this.fetched(flat, send));
  }

  open(job: KeyJob): Opening {
    const first = job.id === undefined ? undefined : this.firsts.get(job.id);
    if (!first) return PLAIN_CLAIMS.open(job);
    this.firsts.delete(job.id!);
    return first;
  }

  last(session: KeySession, call: ClaimArgs, job: KeyJob, token: string): Promise<ClaimResult | Completed> {
    const { finishes, worker } = this;
    // Not fused (yet): the run's own claim, with no promise of ours around it.
    if (!finishes || !worker || !job.id || !token) return session.claim(call);
    return this.lastCompleting(session, call, job, token, finishes, worker);
  }

  /** The last claim with BullMQ's completion of `job` (whose id `last` checked) in it. */
  private async lastCompleting(
    session: KeySession,
    call: ClaimArgs,
    job: KeyJob,
    token: string,
    finishes: FinishCalls,
    worker: { mayFetchNext(token: string): boolean },
  ): Promise<ClaimResult | Completed> {
    const { fusion } = this;
    // As BullMQ's own completion would (see ShardWorker.aroundProcess).
    const fetchNext = worker.mayFetchNext(token);
    const { call: finishCall, derived } = finishes.callFor(job, token, fetchNext);
    const next = fetchNext && fusion && !fusion.limited() ? { lock: KeyLock.newValue(), root: fusion.config.root } : undefined;
    const sentAt = Date.now();
    // The lane builds `call` for this claim alone: the completion is set on it, not on a copy.
    call.finish = next ? { call: finishCall, derived, next } : { call: finishCall, derived };
    const claimed = await session.claim(call);
    if (!claimed.held || claimed.finished === undefined) return claimed;
    // The job is complete: BullMQ's completion of it takes this reply, and the next job's first
    // claim, if the reply carries one, waits for its run.
    finishes.completed(job.id!, finishCall, claimed.finished);
    if (next) this.keep(claimed.finished, next.lock, sentAt);
    return { completed: { settled: claimed.settled ?? [] } };
  }

  /**
   * A fetch of the worker's backend (`flat`, as BullMQ built it): with a fusion, made with the
   * fetched key's first claim; `plain` sends BullMQ's own.
   */
  private async fetched(flat: unknown[], plain: () => unknown): Promise<unknown> {
    const { fusion } = this;
    if (!fusion) return plain();
    try {
      await fusion.agree();
    } catch {
      // The run of whatever this fetches fails on the same check, where it is logged.
      return plain();
    }
    // Read after the check, which hears the limits the batcher's config records.
    if (fusion.limited()) return plain();
    const lock = KeyLock.newValue();
    const sentAt = Date.now();
    const reply = await fetch(fusion.client(), fusion.config, lock, splitCall(flat, fetchKeyCount()));
    this.keep(reply, lock, sentAt);
    return reply;
  }

  /** Keeps the first claim a fetch reply carries for the fetched job's run. */
  private keep(reply: unknown, lock: string, sentAt: number): void {
    const fetched = fetchReplyOf(reply);
    if (!fetched) return;
    // Every fetched job is run, which takes its claim; a bound keeps a bug from growing this.
    if (this.firsts.size >= MAX_FIRSTS) this.firsts.delete(this.firsts.keys().next().value!);
    const claimed = fetched.carried as unknown[];
    this.firsts.set(fetched.jobId, { lock, sentAt, ...(claimed[0] !== 0 && { claimed: claimResult(claimed) }) });
  }
}
