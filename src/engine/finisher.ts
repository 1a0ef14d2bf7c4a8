import { setTimeout as sleep } from 'node:timers/promises';
import {
  answerCompletions,
  backendProblem,
  BULLMQ_FINISH_KEYS,
  bullmqScript,
  completionCall,
  nextJobData,
  redisBackend,
  routeCommands,
  type BackendFactory,
  type QueueBaseOptions,
  type RedisQueueBackend,
} from '../bullmq';
import {
  bullmqCall,
  claimResult,
  fetch,
  type BullmqCall,
  type ClaimCall,
  type ClaimResult,
  type FirstClaimConfig,
} from '../storage/protocol';
import { fastScriptsProblem, type RedisClient, type ScriptArg } from '../storage/scripts';
import { KeyLock } from './lock';
import { sharedFill } from '../core/fill';
import { incidentBackoffMs } from '../core/limits';
import { isReplyError } from '../core/redis-errors';
import type { ShardWorker } from './shard-worker';
import type { RunOptions } from './run-options';
import type { KeyJob } from '../core/types';

/** How many of BullMQ's keys its moveToActive takes (its arguments follow them in the flat list its backend builds). */
let moveToActiveKeys: number | undefined;

/** First claims and argument templates kept at most: far more than a worker's concurrency. */
const MAX_KEPT = 10_000;

/** Where BullMQ's moveToFinished arguments hold what changes from one completion to the next. */
const FINISH_ARG = { jobId: 0, timestamp: 1, fetchNext: 5, prefix: 6 } as const;

/**
 * Whether a completion's keys are what the claim derives from BullMQ's arguments (see
 * finish-job.lua) and its arguments sit where `callFor` sets them: true for the BullMQ this was
 * written against; a BullMQ that builds them otherwise gets its keys sent, as built.
 * @internal
 */
export function derivable(call: BullmqCall, jobId: string, fetchNext: boolean): boolean {
  const { keys, args } = call;
  const prefix = args[FINISH_ARG.prefix];
  return (
    typeof prefix === 'string' &&
    args[FINISH_ARG.jobId] === jobId &&
    typeof args[FINISH_ARG.timestamp] === 'number' &&
    args[FINISH_ARG.fetchNext] === (fetchNext ? 1 : 0) &&
    keys.length === BULLMQ_FINISH_KEYS.length &&
    BULLMQ_FINISH_KEYS.every((name, i) => keys[i] === prefix + (name === '' ? jobId : name))
  );
}

/**
 * Why the fused path cannot run on `backend` with the installed BullMQ, or undefined when it can:
 * the scripts fetch-and-claim.lua and claim-and-finish.lua inline (they are built, see
 * storage/scripts `FAST_PATH`), with the keys they derive, and the backend's members the worker
 * hooks. The check `fastPath: 'auto'` makes when a worker starts.
 */
export function fastPathProblem(backend: RedisQueueBackend): string | undefined {
  try {
    bullmqScript('moveToActive');
    const keys = bullmqScript('moveToFinished').keys;
    if (keys !== BULLMQ_FINISH_KEYS.length) return `its moveToFinished takes ${keys} keys, not ${BULLMQ_FINISH_KEYS.length}`;
  } catch (err) {
    return err instanceof Error ? err.message : String(err);
  }
  const problem = fastScriptsProblem() ?? backendProblem(backend);
  if (problem) return problem;
  if (backend.moveToFinishedKeys.length !== BULLMQ_FINISH_KEYS.length) {
    return `its backend builds ${backend.moveToFinishedKeys.length} moveToFinished keys, not ${BULLMQ_FINISH_KEYS.length}`;
  }
  return undefined;
}

/** How a worker's backend is made: the plain one on a Cluster or with `fastPath: 'off'`; `warn` hears why 'auto' fell back to it. */
export interface BackendMode {
  plain: boolean;
  warn: (problem: string) => void;
}

/**
 * A key job's first claim, made in the call that fetched the job: the lock it took, when that
 * call was sent, and its reply; no reply when the claim failed in Redis (the run then makes its
 * own, with the same lock value, in case the failed one took the lock).
 */
export interface FirstClaim {
  lock: string;
  sentAt: number;
  claim?: ClaimResult;
}

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
 * Fuses a key job's run into BullMQ's own calls, so that in steady state a run of one slice is
 * one round trip, as a BullMQ job is:
 * - a fetch (BullMQ's moveToActive) also takes the fetched key's lock and claims its first slice
 *   (fetch-and-claim.lua), and the run starts from that claim (`takeFirst`) instead of sending its own;
 * - the claim that ends a run (nothing left) also completes its job with BullMQ's own
 *   moveToFinished (`callFor`), which fetches the next job, and claims that job's first slice
 *   too. When the processor returns, BullMQ completes the job as usual, and the backend answers
 *   with the claim's reply instead of sending it: BullMQ reads it as its own (the next job, or an
 *   error code) and emits its events as usual.
 *
 * Only for workers made by `createWorker` on a standalone Redis: on a Cluster BullMQ's keys sit
 * in another slot than the key's, and a worker of the user's own (`processor()`) has BullMQ's
 * default backend. Either way runs work as before, with their own calls. Fetches claim only with
 * a `fusion` (see `firstClaimConfig`), once the worker's store agreement holds.
 */
export class JobFinisher {
  private backend: RedisQueueBackend | undefined;
  private worker: ShardWorker | undefined;
  constructor(private readonly fusion?: Fusion) {}

  /** moveToFinished replies of jobs completed by a claim, by job id, until BullMQ asks. */
  private readonly replies = new Map<string, { reply: unknown; finishedOn: number }>();
  /** BullMQ's moveToFinished arguments for a completed key job, by worker token (see `callFor`). */
  private readonly templates = new Map<string, { args: readonly ScriptArg[]; removeOnComplete: unknown; attempts: unknown }>();
  /** First claims made by the fetch of their job, by job id, until the job's run starts. */
  private readonly firsts = new Map<string, FirstClaim>();

  /** A BullMQ backend factory: BullMQ's Redis backend, whose fetches claim and whose completions take our replies. */
  factory(mode: BackendMode): BackendFactory<RedisQueueBackend> {
    return (name: string, opts: QueueBaseOptions, options?: Parameters<BackendFactory>[2]) => {
      const backend = redisBackend(name, opts, options);
      if (!mode.plain) this.fuse(backend, mode);
      delayRefusedFetches(backend);
      return backend;
    };
  }

  /** Fuses runs into the backend's fetches and completions (see the class), when the installed BullMQ allows. */
  private fuse(backend: RedisQueueBackend, mode: BackendMode): void {
    const problem = fastPathProblem(backend);
    if (problem) return mode.warn(problem);
    routeCommands(backend, (command, args, send) => {
      const fusion = this.fusion;
      return command === 'moveToActive' && fusion ? this.fetch(fusion, args, send) : send();
    });
    answerCompletions(backend, (job) => {
      const done = job.id === undefined ? undefined : this.replies.get(job.id);
      if (!done) return undefined;
      this.replies.delete(job.id!);
      return Promise.resolve({ result: nextJobData(done.reply as unknown[]), finishedOn: done.finishedOn });
    });
    this.backend = backend;
  }

  /** The worker whose backend this is (it decides whether a completion fetches a next job). */
  serve(worker: ShardWorker): void {
    this.worker = worker;
  }

  /** The first claim the fetch of this job made, once: the run starts from it. */
  takeFirst(jobId: string | undefined): FirstClaim | undefined {
    if (jobId === undefined) return undefined;
    const first = this.firsts.get(jobId);
    if (first) this.firsts.delete(jobId);
    return first;
  }

  /** The `finish` of a run's claim that may end it, or undefined when its job cannot be completed in a claim. */
  callFor(job: KeyJob, token: string): NonNullable<ClaimCall['finish']> | undefined {
    const { backend, worker } = this;
    if (!backend || !worker || !job.id || !token) return undefined;
    // As BullMQ's own completion would (see ShardWorker.processJob).
    const fetchNext = worker.mayFetchNext(token);
    const next =
      fetchNext && this.fusion && !this.fusion.limited() ? { next: { lock: KeyLock.newValue(), root: this.fusion.config.root } } : {};
    const template = this.templates.get(token);
    if (template && template.removeOnComplete === job.opts.removeOnComplete && template.attempts === job.opts.attempts) {
      const args = template.args.slice();
      args[FINISH_ARG.jobId] = job.id;
      args[FINISH_ARG.timestamp] = Date.now();
      args[FINISH_ARG.fetchNext] = fetchNext ? 1 : 0;
      return { call: { keys: [], args }, derived: true, ...next };
    }
    const { flat, keys } = completionCall(backend, job, job.opts.removeOnComplete, token, fetchNext);
    const call = bullmqCall(flat, keys);
    if (!derivable(call, job.id, fetchNext)) return { call, ...next };
    // BullMQ packs its options (the token among them) per call; they are the same for every key
    // job this token completes, so later calls copy these arguments and set what changes.
    if (this.templates.size >= MAX_KEPT) this.templates.clear();
    this.templates.set(token, { args: call.args, removeOnComplete: job.opts.removeOnComplete, attempts: job.opts.attempts });
    return { call: { keys: [], args: call.args }, derived: true, ...next };
  }

  /**
   * The claim completed the job with `finish` (from `callFor`): BullMQ's completion of it gets
   * this reply, and the next job's first claim, if the reply carries one, waits for its run.
   */
  completed(jobId: string, finish: NonNullable<ClaimCall['finish']>, reply: unknown, sentAt: number): void {
    // The completion's timestamp is BullMQ's `finishedOn`.
    this.replies.set(jobId, { reply, finishedOn: Number(finish.call.args[FINISH_ARG.timestamp]) });
    if (finish.next) this.keepFirst(reply, finish.next.lock, sentAt);
  }

  private async fetch(fusion: Fusion, flat: unknown[], plain: () => unknown): Promise<unknown> {
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
    const reply = await fetch(
      fusion.client(),
      fusion.config,
      lock,
      bullmqCall(flat, (moveToActiveKeys ??= bullmqScript('moveToActive').keys)),
    );
    this.keepFirst(reply, lock, sentAt);
    return reply;
  }

  /** Keeps the first claim a fetch reply carries (its fifth element) for the fetched job's run. */
  private keepFirst(reply: unknown, lock: string, sentAt: number): void {
    if (!Array.isArray(reply) || reply[4] === undefined) return;
    // Every fetched job is run, which takes its claim; a bound keeps a bug from growing this.
    if (this.firsts.size >= MAX_KEPT) this.firsts.delete(this.firsts.keys().next().value!);
    const claimed = reply[4] as unknown[];
    this.firsts.set(String(reply[1]), { lock, sentAt, ...(claimed[0] !== 0 && { claim: claimResult(claimed) }) });
  }
}

/**
 * BullMQ's worker fetches again at once when Redis refuses a fetch with an error reply (out of
 * memory, a busy script; it waits only after a lost connection): with concurrency 4, an incident
 * of 1.8 s saw a thousand fetches a second, each logged. A refused fetch answers after the
 * incident backoff instead, doubling with each refusal in a row, so a worker's fetches slow down
 * to one a second per slot at most (a close waits that long at most for one on its way).
 */
function delayRefusedFetches(backend: RedisQueueBackend): void {
  let refused = 0;
  routeCommands(backend, async (command, _args, send) => {
    if (command !== 'moveToActive') return send();
    try {
      const reply = await send();
      refused = 0;
      return reply;
    } catch (err) {
      if (!isReplyError(err)) throw err;
      await sleep(incidentBackoffMs(++refused));
      throw err;
    }
  });
}
