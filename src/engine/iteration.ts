import { describe, NotInSliceError, SliceTimeoutError } from '../core/errors';
import { retryAfter } from './flow';
import { stopReasonOf, type Stop } from './interrupt';
import { parsePayloads, type Payloads, type Traces } from '../storage/protocol';
import { MAX_SLICE_LINKS } from '../core/limits';
import type { EachIteration, Id, IterationContext, Key, KeyJob, SliceInfo, SliceMiddleware } from '../core/types';

/**
 * One slice's run of the handler: its context (`SliceContext`), the `around` middlewares, and its
 * deadlines. The run's lanes, which claim slices and settle them, are key-run.ts's.
 */

/**
 * Wraps what the handler threw (or its timeout), so the run can tell a failed slice, which is
 * retried or dead-lettered, from Redis trouble on the way, which is not the slice's fault.
 */
export class SliceFailure extends Error {
  constructor(readonly error: unknown) {
    super('batch-by-key: the slice failed', { cause: error });
    this.name = 'SliceFailure';
  }
}

/** What a slice's run reads of the batcher's options. */
export interface SliceLimits {
  around: readonly SliceMiddleware[];
  sliceTimeoutMs: number;
  /** How long a slice may go on once its run stops for a shutdown, before it is handed back unfinished. */
  shutdownTimeoutMs: number;
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
 *
 * What it hands out is the handler's own: `ids` is a copy of the slice's ids (the handler's
 * argument too), and the data is parsed from the claim's text for this context alone, so a
 * handler may splice, sort or change them. The run's record of the slice (the ids it acks, fails,
 * retries and counts, the data its dead letters keep) is never handed out, and what `fail`
 * gathers sits in private fields the handler cannot reach.
 */
export class SliceContext implements IterationContext, SliceInfo {
  readonly key: Key;
  readonly ids: readonly Id[];
  readonly attempt: number;
  readonly job: KeyJob;
  /** For the `around` middlewares (see SliceMiddleware). */
  readonly traceparents: readonly string[];
  /** The run's record of the slice's ids, which `fail` checks against. */
  readonly #slice: readonly Id[];
  readonly #stop: Stop;
  /** The claim's data as JSON (see ClaimResult), parsed at the first read of it. */
  readonly #payloadsJson: string | undefined;
  #payloads: Payloads | undefined;
  /** What `fail` reported, id → its error; undefined until a first call. */
  #failures: Map<Id, unknown> | undefined;
  /** The slice's ids as a set, for `fail`'s check: built at its first call (most slices never fail an id). */
  #members: Set<Id> | undefined;
  #ended = false;

  constructor(slice: SliceInfo, stop: Stop, payloadsJson: string | undefined, traces: Traces | undefined) {
    this.key = slice.key;
    this.ids = [...slice.ids];
    this.#slice = slice.ids;
    this.attempt = slice.attempt;
    this.job = slice.job;
    this.traceparents = traceparentsOf(traces);
    this.#stop = stop;
    this.#payloadsJson = payloadsJson;
  }

  /** Made on first read (see `Stop`). */
  get signal(): AbortSignal {
    return this.#stop.signal;
  }

  retryAfter(ms: number): never {
    return retryAfter(ms);
  }

  fail(id: Id | number, error: unknown): void {
    // The slice's fate is settled: a handler abandoned at its timeout or a shutdown may still call
    // this from a callback of its own, where a throw would be uncaught and end the process.
    if (this.#ended) return;
    const member = typeof id === 'number' ? String(id) : id;
    this.#members ??= new Set(this.#slice);
    if (!this.#members.has(member)) {
      throw new NotInSliceError(
        `ctx.fail got ${describe(id)}, which is not an id of this slice of key ${JSON.stringify(this.key)} (${this.#slice.length} ids): report only the slice's own ids`,
      );
    }
    (this.#failures ??= new Map()).set(member, error);
  }

  /**
   * Ends the slice for `fail`: later calls do nothing. The ids reported and their errors, or undefined
   * for none (the whole slice succeeded, or its throw decides its fate).
   */
  end(): ReadonlyMap<Id, unknown> | undefined {
    this.#ended = true;
    return this.#failures;
  }

  data(id: Id): unknown {
    return this.of(id).at(-1);
  }

  payloads(id: Id): unknown[] {
    return [...this.of(id)];
  }

  private of(id: Id): readonly unknown[] {
    if (this.#payloadsJson === undefined) return NO_PAYLOADS;
    const payloads = (this.#payloads ??= parsePayloads(this.#payloadsJson));
    return Object.hasOwn(payloads, id) ? payloads[id]! : NO_PAYLOADS;
  }
}

/**
 * Runs the handler (inside the `around` middlewares) on one slice, but waits at most
 * `sliceTimeoutMs`: a handler that never returns would otherwise hold the key (and a worker
 * slot) forever. On timeout ctx.signal aborts with a SliceTimeoutError and the slice counts as
 * failed. Once the run stops for a shutdown, the slice gets `shutdownTimeoutMs` more at most: then
 * the wait ends with the stop's ShutdownError, so the slice goes back as interrupted and a closing
 * worker gives its key back in time. Either way the handler is not killed. Returns the ids the
 * handler reported failed (`ctx.fail`), with their errors, when it returned.
 */
export async function runHandler(
  handler: EachIteration,
  limits: SliceLimits,
  ctx: SliceContext,
  signal: Stop,
): Promise<ReadonlyMap<Id, unknown> | undefined> {
  try {
    const result: unknown = limits.around.length === 0 ? handler(ctx.ids as string[], ctx) : wrap(limits.around, 0, ctx, handler);
    // Any thenable, not only this realm's Promise: an async function from a vm context, a
    // Bluebird promise, or a lazy one (a query builder) that runs only once `then` is called.
    if (isThenable(result)) await sliceDeadlines(Promise.resolve(result), ctx.key, limits, signal);
  } catch (error) {
    // A throw decides the whole slice; a handler abandoned at its deadline can report no more.
    ctx.end();
    throw new SliceFailure(error);
  }
  return ctx.end();
}

async function sliceDeadlines(work: Promise<unknown>, key: Key, p: SliceLimits, signal: Stop): Promise<void> {
  const timers: NodeJS.Timeout[] = [];
  const late = new Promise<never>((_, reject) => {
    timers.push(
      setTimeout(() => {
        const error = new SliceTimeoutError(
          `a slice of key ${JSON.stringify(key)} ran longer than sliceTimeoutMs (${p.sliceTimeoutMs} ms)`,
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
