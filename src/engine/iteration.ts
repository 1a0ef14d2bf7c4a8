import { RateLimitedError, SliceCrashedError, SliceTimeoutError } from '../core/errors';
import { retryAfter } from './flow';
import type { BatcherEmitter } from '../core/events';
import type { RetrySlice } from './failures';
import { firstReason, Stop, stopReasonOf, type InterruptCheck, type SliceEnd } from './interrupt';
import { laneNames, type KeyNames } from '../storage/keys';
import type { KeySession } from '../storage/key-session';
import type { ClaimCall, ClaimResult, Payloads, Traces } from '../storage/protocol';
import { MAX_SLICE_LINKS } from '../core/limits';
import type { EachIteration, Id, IterationContext, Key, KeyJob, RateLimit, SliceInfo, SliceMiddleware, StopReason } from '../core/types';

/**
 * Wraps what the handler threw (or its timeout), so the run can tell a failed slice, which is
 * retried or dead-lettered, from Redis trouble on the way, which is not the slice's fault.
 */
class SliceFailure extends Error {
  constructor(readonly error: unknown) {
    super('batch-by-key: the slice failed', { cause: error });
    this.name = 'SliceFailure';
  }
}

/** How one job run ended, when it did not throw. */
export type RunOutcome =
  /**
   * No id left: the last slice is acked; `released` when that claim released the lock too, and
   * `finished` (BullMQ's reply) when it completed the job as well (see finisher.ts).
   */
  | { kind: 'drained'; released: boolean; finished?: Finished }
  /** Ids are pending but none is due for `waitMs` (a zset time, a failed slice's backoff); the last slice is acked. */
  | { kind: 'waiting'; waitMs: number; released: boolean }
  /**
   * Stopped between slices; the last slice is done but not yet acked (release acks it), or,
   * with `restore`, it gave up because of the stop and goes back to pending.
   */
  | { kind: 'stopped'; reason: StopReason; restore?: boolean; holdMs?: number }
  /** The lock was lost; nothing can be acked, the in-flight ids wait for the next holder. */
  | { kind: 'lock_lost' };

/**
 * What the claim that completed the job returned: BullMQ's reply and the tickets its ack settled,
 * with the `finish` it was sent with and when (see finisher.ts `completed`).
 */
export interface Finished {
  reply: unknown;
  settled: readonly string[];
  finish: NonNullable<ClaimCall['finish']>;
  sentAt: number;
}

/** A slice whose handler failed, for the run to settle. */
export interface FailedSlice {
  slice: SliceInfo;
  /** The failed slice these ids were a retry of, if any. */
  previous: RetrySlice | undefined;
  error: unknown;
  /** Unique per slice; names the parts it is split into. */
  sliceId: string;
  /** The slice's lane (whose own names the failure's script derives from the key's). */
  lane: number;
  durationMs: number;
  /** The data the slice's ids carried, for their dead letters. */
  payloads: Payloads | undefined;
  /** The trace context the slice's ids carried, for the parts retried to keep. */
  traces: Traces | undefined;
}

export interface IterationParams {
  /** The key's protocol, under the run's lock (its claims hand what they settle to the ticket outbox). */
  session: KeySession;
  sliceSize: number;
  /** Lanes: slices of the key run at once. */
  concurrency: number;
  sliceTimeoutMs: number;
  /** How long a slice may go on once its run stops for a shutdown, before it is handed back unfinished. */
  shutdownTimeoutMs: number;
  handler: EachIteration;
  around: readonly SliceMiddleware[];
  events: BatcherEmitter;
  key: Key;
  job: KeyJob;
  /**
   * The run's controller, aborted on shutdown (ShutdownError) or a lost lock (LockLostError). A
   * single lane uses it as its slices' ctx.signal, and a slice's timeout aborts it too (the
   * timeout ends the run anyway); with lanes each lane has its own, which follows it.
   */
  stop: Stop;
  interrupts: readonly InterruptCheck[];
  /** Retries, splits or dead-letters a failed slice; false when the lock was lost first. */
  settleFailure: (failed: FailedSlice) => Promise<boolean>;
  /** Whether a slice whose last run died with its worker may run again whole. */
  mayRunAgain: (slice: RetrySlice) => boolean;
  /** The key's rate limit for this run, if any (its claims take no more than the window allows). */
  rate: RateLimit | undefined;
  /** BullMQ's call to complete the job, for the claim that may end a single-lane run (see finisher.ts). */
  finish: () => ClaimCall['finish'];
}

/**
 * One job run: `concurrency` lanes, each a loop that claims a slice (acking its previous one in
 * the same call), runs the handler, then asks the interrupt checks. Progress is committed only
 * after a slice succeeds, and the budget is checked only between slices (as job-iteration does).
 * A failed slice is settled on its own (see failures.ts) and the lane goes on with the key's
 * other ids. `first` is lane 0's first claim, made by the run as it took the lock: it recovered
 * whatever a dead run left in flight, in any lane, so the other lanes start after it, and only
 * when it found work. A single lane's last claim releases the lock too.
 */
export async function iterate(p: IterationParams, first: ClaimResult & { held: true }): Promise<RunOutcome> {
  const run: RunState = { stopped: undefined, error: undefined };
  const lanes = [contained(run, runLane(p, run, 0, first))];
  if (p.concurrency > 1 && first.ids.length > 0) {
    for (let lane = 1; lane < p.concurrency; lane++) lanes.push(contained(run, runLane(p, run, lane)));
  }
  const outcomes = await Promise.all(lanes);
  if (run.error) throw run.error.thrown;
  return combine(outcomes);
}

interface RunState {
  /** Set by the first lane that stops the run; the others stop after their slice. */
  stopped: RunOutcome | undefined;
  /** What a lane threw (Redis trouble): the run rethrows it once every lane has stopped. */
  error: { thrown: unknown } | undefined;
}

/**
 * A lane that throws stops the others after their slice, and the run waits for them before it
 * rethrows: releasing the lock while a lane still runs would let a new run restore, and run
 * again, the slices still running here.
 */
async function contained(run: RunState, lane: Promise<RunOutcome>): Promise<RunOutcome> {
  try {
    return await lane;
  } catch (thrown) {
    run.error ??= { thrown };
    run.stopped ??= { kind: 'stopped', reason: 'shutdown' };
    return run.stopped;
  }
}

async function runLane(p: IterationParams, run: RunState, lane: number, first?: ClaimResult): Promise<RunOutcome> {
  const { session } = p;
  const names = laneNames(session.names, lane);
  // One signal per lane and run: a timed-out slice ends its lane (and the run), so it never needs
  // resetting, and a timeout in one lane never aborts another lane's slice.
  const signal = p.concurrency === 1 ? p.stop : new Stop(undefined, p.stop);
  // With lanes, the lock is released once every lane has ended (see processor.ts `conclude`).
  const releaseIfEmpty = p.concurrency === 1;
  // Whether the last claim emptied pending, so that this one likely ends the run: only then is
  // BullMQ's completion sent along (building and sending it costs a few µs).
  let emptied = false;
  for (let n = 1; ; n++) {
    const sliceId = sliceIdOf(session.lock.value, lane, n);
    const finish: ClaimCall['finish'] = releaseIfEmpty && emptied ? p.finish() : undefined;
    const sentAt = Date.now();
    const claimed: ClaimResult =
      n === 1 && first
        ? first
        : await session.claim({
            claimId: sliceId,
            settle: 'ack',
            count: p.sliceSize,
            lane,
            releaseIfEmpty,
            ...(p.rate && { rate: p.rate }),
            ...(finish && { finish }),
          });
    if (!claimed.held) return { kind: 'lock_lost' };
    // The job is complete already: from here on nothing may requeue it (see processor.ts).
    if (claimed.finished !== undefined && finish)
      return { kind: 'drained', released: true, finished: { reply: claimed.finished, settled: claimed.settled ?? [], finish, sentAt } };
    emptied = claimed.ids.length < p.sliceSize;
    if (claimed.ids.length === 0) return nothingClaimed(claimed.waitMs, releaseIfEmpty);
    // Another lane's stop is this lane's too, but its slice succeeded: nothing to restore. A run
    // stopped before its slice starts (its job was fetched as the worker began closing or
    // pausing) hands the slice back unrun.
    const outcome =
      stoppedBefore(p.stop) ??
      (await runOne(p, { names, lane, signal }, claimed, sliceId)) ??
      (run.stopped && { ...run.stopped, restore: false }) ??
      stopReason(p, { full: claimed.ids.length >= p.sliceSize });
    if (outcome) {
      run.stopped ??= outcome;
      // Lane 0's last slice is settled by the release; the other lanes settle their own.
      if (lane > 0 && outcome.kind === 'stopped') {
        await session.settle({ lane, claimId: `${sliceId}:end`, how: outcome.restore ? 'restore' : 'ack', holdMs: outcome.holdMs });
      }
      return outcome;
    }
  }
}

interface LaneContext {
  names: KeyNames;
  lane: number;
  /** The lane's ctx.signal: aborted by the run's stop, or by a slice's timeout. */
  signal: Stop;
}

/** Runs one claimed slice; an outcome when the slice ends the run. */
async function runOne(
  p: IterationParams,
  lane: LaneContext,
  claimed: { ids: Id[]; retry?: RetrySlice; waitedMs?: number; payloads?: Payloads; traces?: Traces },
  sliceId: string,
): Promise<RunOutcome | undefined> {
  const slice: SliceInfo = { key: p.key, ids: claimed.ids, attempt: (claimed.retry?.attempts ?? 0) + 1, job: p.job };
  // A failed slice run again carries its ids' trace context in its JSON; pending ids, in the claim's reply.
  const traces = claimed.retry ? claimed.retry.traces : claimed.traces;
  const crashed = claimed.retry?.crashed ? claimed.retry : undefined;
  if (crashed && !p.mayRunAgain(crashed)) {
    // Its death was its last allowed run (a poison id that kills the worker): settle it as that
    // failure, which splits or dead-letters it, rather than run it to die once more.
    const error = new SliceCrashedError(
      `the run of this slice of key ${JSON.stringify(p.key)} died before it finished (a crash, an OOM kill, a lost lock)`,
    );
    const failed = {
      slice,
      previous: { ...crashed, attempts: crashed.attempts - 1 },
      error,
      sliceId,
      lane: lane.lane,
      durationMs: 0,
      payloads: claimed.payloads,
      traces,
    };
    return (await p.settleFailure(failed)) ? undefined : { kind: 'lock_lost' };
  }
  const started = performance.now();
  try {
    await runSlice(p, new SliceContext(slice, lane.signal, claimed.payloads, traces), lane.signal);
    p.events.processed(slice.ids.length);
    if (p.events.wants('slice:done')) {
      p.events.emit('slice:done', {
        ...slice,
        durationMs: performance.now() - started,
        ...(claimed.waitedMs !== undefined && { waitedMs: claimed.waitedMs }),
      });
    }
    return undefined;
  } catch (thrown) {
    // Redis trouble in a claim is not the slice's fault: the safety net in runKey retries the run.
    if (!(thrown instanceof SliceFailure)) throw thrown;
    // A handler that gives up because ctx.signal fired for a shutdown or a lost lock is
    // stopping, not failing (a slice timeout is a failure).
    const stop = stopReasonOf(p.stop);
    if (stop === 'lock_lost') return { kind: 'lock_lost' };
    if (stop === 'shutdown') return { kind: 'stopped', reason: 'shutdown', restore: true };
    // The upstream said "not now": the slice goes back unchanged and the key waits, no attempt spent.
    // At least 1 ms, so that an ask for 0 still holds the key (the claim applies the floor).
    if (thrown.error instanceof RateLimitedError)
      return { kind: 'stopped', reason: 'rate_limited', restore: true, holdMs: Math.max(1, thrown.error.retryAfterMs) };
    const failed = {
      slice,
      previous: claimed.retry,
      error: thrown.error,
      sliceId,
      lane: lane.lane,
      durationMs: performance.now() - started,
      payloads: claimed.payloads,
      traces,
    };
    if (!(await p.settleFailure(failed))) return { kind: 'lock_lost' };
    // Not stopping, so a timeout aborted it. The abandoned handler may still run; a fresh run
    // gets a fresh signal.
    if (lane.signal.aborted) return { kind: 'stopped', reason: 'slice_timeout' };
    return undefined;
  }
}

const NO_PAYLOADS: readonly unknown[] = Object.freeze([]);
const NO_TRACEPARENTS: readonly string[] = Object.freeze([]);

/** The distinct traceparents of a slice's ids, at most MAX_SLICE_LINKS (many ids of one push share one). */
function traceparentsOf(traces: Traces | undefined): readonly string[] {
  if (!traces) return NO_TRACEPARENTS;
  return [...new Set(Object.values(traces))].slice(0, MAX_SLICE_LINKS);
}

/**
 * What the handler and the middlewares get for a slice: the slice, its signal, and its ids' data.
 * A class, so a slice costs one object (its methods live on the prototype).
 */
class SliceContext implements IterationContext, SliceInfo {
  readonly key: Key;
  readonly ids: readonly Id[];
  readonly attempt: number;
  readonly job: KeyJob;
  /** For the `around` middlewares (see SliceMiddleware). */
  readonly traceparents: readonly string[];

  constructor(
    slice: SliceInfo,
    private readonly stop: Stop,
    private readonly claimedPayloads: Payloads | undefined,
    traces: Traces | undefined,
  ) {
    this.key = slice.key;
    this.ids = slice.ids;
    this.attempt = slice.attempt;
    this.job = slice.job;
    this.traceparents = traceparentsOf(traces);
  }

  /** Made on first read (see `Stop`). */
  get signal(): AbortSignal {
    return this.stop.signal;
  }

  retryAfter(ms: number): never {
    return retryAfter(ms);
  }

  data(id: Id): unknown {
    return this.of(id).at(-1);
  }

  payloads(id: Id): unknown[] {
    return [...this.of(id)];
  }

  private of(id: Id): readonly unknown[] {
    const payloads = this.claimedPayloads;
    return payloads && Object.hasOwn(payloads, id) ? payloads[id]! : NO_PAYLOADS;
  }
}

/** The outcome of a run already stopped by a shutdown or a lost lock, before its next slice. */
function stoppedBefore(stop: Stop): RunOutcome | undefined {
  const reason = stopReasonOf(stop);
  if (reason === 'lock_lost') return { kind: 'lock_lost' };
  return reason ? { kind: 'stopped', reason, restore: true } : undefined;
}

function stopReason(p: IterationParams, slice: SliceEnd): RunOutcome | undefined {
  const reason = firstReason(p.interrupts, slice);
  if (reason === 'lock_lost') return { kind: 'lock_lost' };
  return reason ? { kind: 'stopped', reason } : undefined;
}

/** A lane's end when its claim found nothing: waiting `waitMs` for something due, or drained (0). */
export function nothingClaimed(waitMs: number, released: boolean): RunOutcome {
  return waitMs > 0 ? { kind: 'waiting', waitMs, released } : { kind: 'drained', released };
}

/** The id of a lane's n-th slice of a run (its claim's id too). */
export function sliceIdOf(lock: string, lane: number, n: number): string {
  return `${lock}:${lane}:${n}`;
}

/** The run's outcome from its lanes': a lost lock over a stop, a stop over a wait, a wait over drained. */
export function combine(outcomes: readonly RunOutcome[]): RunOutcome {
  if (outcomes.length === 1) return outcomes[0]!;
  const first = (kind: RunOutcome['kind']) => outcomes.find((o) => o.kind === kind);
  const waits = outcomes.flatMap((o) => (o.kind === 'waiting' ? [o.waitMs] : []));
  // Lane 0 restores its own slice after a shutdown (through the release), so its stop is the one that says so.
  const stopped = outcomes[0]?.kind === 'stopped' ? outcomes[0] : first('stopped');
  // Lanes never release the lock in a claim: the run does once they have all ended.
  return (
    first('lock_lost') ??
    stopped ??
    (waits.length > 0 ? { kind: 'waiting', waitMs: Math.min(...waits), released: false } : { kind: 'drained', released: false })
  );
}

/**
 * Runs the handler (inside the `around` middlewares) on one slice, but waits at most
 * `sliceTimeoutMs`: a handler that never returns would otherwise hold the key (and a worker
 * slot) forever. On timeout ctx.signal aborts with a SliceTimeoutError and the slice counts as
 * failed. Once the run stops for a shutdown, the slice gets `shutdownTimeoutMs` more at most: then
 * the wait ends with the stop's ShutdownError, so the slice goes back as interrupted and a closing
 * worker gives its key back in time. Either way the handler is not killed.
 */
async function runSlice(p: IterationParams, ctx: SliceContext, signal: Stop): Promise<void> {
  try {
    const result: unknown = p.around.length === 0 ? p.handler(ctx.ids as string[], ctx) : wrap(p.around, 0, ctx, p.handler);
    // Any thenable, not only this realm's Promise: an async function from a vm context, a
    // Bluebird promise, or a lazy one (a query builder) that runs only once `then` is called.
    if (isThenable(result)) await sliceDeadlines(Promise.resolve(result), p, signal);
  } catch (error) {
    throw new SliceFailure(error);
  }
}

async function sliceDeadlines(work: Promise<unknown>, p: IterationParams, signal: Stop): Promise<void> {
  const timers: NodeJS.Timeout[] = [];
  const late = new Promise<never>((_, reject) => {
    timers.push(
      setTimeout(() => {
        const error = new SliceTimeoutError(
          `a slice of key ${JSON.stringify(p.key)} ran longer than sliceTimeoutMs (${p.sliceTimeoutMs} ms)`,
        );
        signal.abort(error);
        reject(error);
      }, p.sliceTimeoutMs),
    );
    const onStop = () => {
      if (stopReasonOf(signal) === 'shutdown') timers.push(setTimeout(() => reject(signal.reason as Error), p.shutdownTimeoutMs));
    };
    if (signal.aborted) onStop();
    else signal.watch(onStop);
  });
  // A rejection of the handler after a deadline is dropped: nobody waits for it any more.
  work.catch(() => undefined);
  try {
    await Promise.race([work, late]);
  } finally {
    for (const timer of timers) clearTimeout(timer);
    signal.watch(undefined);
  }
}

function isThenable(value: unknown): value is PromiseLike<unknown> {
  return (
    (typeof value === 'object' || typeof value === 'function') && value !== null && typeof (value as { then?: unknown }).then === 'function'
  );
}

function wrap(around: readonly SliceMiddleware[], i: number, ctx: SliceContext, handler: EachIteration): Promise<void> {
  const middleware = around[i];
  if (!middleware) return Promise.resolve(handler(ctx.ids as string[], ctx)).then(() => undefined);
  return middleware(ctx, () => wrap(around, i + 1, ctx, handler));
}
