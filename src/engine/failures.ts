import { textOf, wellFormedText } from '../core/text';
import { UnrecoverableError } from '../bullmq';
import { asError, PermanentError } from '../core/errors';
import { MAX_TIMER_MS } from '../core/limits';
import { log } from '../core/logger';
import type { BatcherEmitter } from '../core/events';
import type { RetrySlice, Traces } from '../storage/protocol';
import type { KeySession } from '../storage/key-session';
import { MAX_TICKET_ERRORS } from '../push/progress';
import type { DeadIds, DeadLetterBox, SerializedError } from './dead-letters';
import type { Backoff, BatcherEvents, FailureOutcome, Id, Logger, SliceInfo } from '../core/types';

export type { RetrySlice };

interface FailurePolicy {
  attempts: number;
  backoff: Backoff;
  isolateFailures: boolean;
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
  /** The data the slice's ids carried, as the claim returned it (see ClaimResult), for their dead letters. */
  payloadsJson: string | undefined;
  /** The trace context the slice's ids carried, for the parts retried to keep. */
  traces: Traces | undefined;
  /**
   * The ids the handler reported failed (`ctx.fail`), with their errors, when it returned: the
   * slice's other ids succeeded (see `planOutcomes`); `error` is then the first one's.
   */
  failures?: ReadonlyMap<Id, unknown>;
}

/** What settling a failed slice needs of the worker (a processor's deps have it all). */
export interface FailureDeps {
  options: FailurePolicy & { logger: Logger };
  deadLetters: DeadLetterBox;
  events: BatcherEmitter;
}

/** What to do with a failed slice: parts to retry (each with its delay) and ids to dead-letter. */
export interface FailurePlan extends DeadIds {
  outcome: FailureOutcome;
  retry: { delayMs: number; slice: RetrySlice }[];
  dead: Id[];
  /** With `retry`: the backoff before the whole slice runs again. */
  retryInMs?: number;
  /** Each failed id's own error (`ctx.fail`), for its dead letter; else every id died of the slice's. */
  errors?: ReadonlyMap<Id, unknown>;
  /** How many of the slice's ids succeeded (`ctx.fail` reported the others): they are acked with the failure. */
  acked?: number;
}

/**
 * Decides the fate of a failed slice. A slice is retried whole, after its backoff, until it has
 * used `attempts`; then it is split in halves, each run once at once, down to single ids, so a
 * bad id ends alone in the dead letters while the others of its slice succeed. A PermanentError
 * skips the retries: the ids it names die at once, or, naming none, the slice goes straight to
 * splitting.
 */
export function planFailure(
  ids: readonly Id[],
  previous: RetrySlice | undefined,
  error: unknown,
  policy: FailurePolicy,
  now: number,
): FailurePlan {
  const attempts = (previous?.attempts ?? 0) + 1;
  const firstFailedAt = previous?.firstFailedAt ?? now;
  const plan = (outcome: FailureOutcome, retry: FailurePlan['retry'], dead: Id[]): FailurePlan => ({
    outcome,
    retry,
    dead,
    attempts,
    firstFailedAt,
    failedAt: now,
  });
  const again = (partIds: Id[], delayMs: number, isolating: boolean) => ({
    delayMs,
    slice: { ids: partIds, attempts, isolating, firstFailedAt },
  });

  const named = error instanceof PermanentError && error.ids ? new Set(error.ids) : undefined;
  const bad = named ? ids.filter((id) => named.has(id)) : [];
  if (bad.length > 0) {
    const rest = ids.filter((id) => !named?.has(id));
    // The others did not fail on their own account: they go again at once, no attempt spent.
    const retry =
      rest.length > 0
        ? [{ delayMs: 0, slice: { ids: rest, attempts: previous?.attempts ?? 0, isolating: previous?.isolating ?? false, firstFailedAt } }]
        : [];
    return plan('dead', retry, bad);
  }
  if (!isPermanent(error) && mayRetry(attempts, previous?.isolating ?? false, policy)) {
    const delayMs = backoffDelay(policy.backoff, attempts, error);
    return { ...plan('retry', [again([...ids], delayMs, false)], []), retryInMs: delayMs };
  }
  if (policy.isolateFailures && ids.length > 1) {
    const mid = Math.ceil(ids.length / 2);
    return plan('split', [again(ids.slice(0, mid), 0, true), again(ids.slice(mid), 0, true)], []);
  }
  return plan('dead', [], [...ids]);
}

/**
 * Decides the fate of the ids a handler reported failed (`ctx.fail`) in a slice it returned from;
 * the slice's other ids succeeded, and are acked. The handler named the bad ids, so nothing is
 * split: they are retried together, after the backoff of their attempt (given the first one's
 * error), until they have used `attempts` (a part being isolated gets one run), then each becomes
 * a dead letter with its own error. An id reported with a PermanentError (or UnrecoverableError)
 * dies at once, as one named by a thrown PermanentError does.
 */
export function planOutcomes(
  ids: readonly Id[],
  failures: ReadonlyMap<Id, unknown>,
  previous: RetrySlice | undefined,
  policy: FailurePolicy,
  now: number,
): FailurePlan {
  const attempts = (previous?.attempts ?? 0) + 1;
  const firstFailedAt = previous?.firstFailedAt ?? now;
  // In slice order, with a list's repeated entries of an id (each runs again).
  const failed = ids.filter((id) => failures.has(id));
  const again = mayRetry(attempts, previous?.isolating ?? false, policy) ? failed.filter((id) => !isPermanent(failures.get(id))) : [];
  const retried = new Set(again);
  const dead = [...new Set(failed.filter((id) => !retried.has(id)))];
  const retryInMs = again.length > 0 ? backoffDelay(policy.backoff, attempts, failures.get(again[0]!)) : undefined;
  return {
    outcome: dead.length > 0 ? 'dead' : 'retry',
    retry: retryInMs === undefined ? [] : [{ delayMs: retryInMs, slice: { ids: again, attempts, isolating: false, firstFailedAt } }],
    dead,
    ...(retryInMs !== undefined && { retryInMs }),
    attempts,
    firstFailedAt,
    failedAt: now,
    errors: failures,
    acked: ids.length - failed.length,
  };
}

/** An error that says its ids can never succeed: no attempt is left to them. */
function isPermanent(error: unknown): boolean {
  return error instanceof PermanentError || error instanceof UnrecoverableError;
}

/**
 * A part to retry keeps its own ids' trace context (a claim took it from the key), so that each
 * run of it links to the pushes of its ids. Links are observability: see docs/operations.md for
 * when they are lost.
 */
function withTraces(slice: RetrySlice, traces: Traces | undefined): RetrySlice {
  if (!traces) return slice;
  // Entries, not assignments: an id may be '__proto__'.
  const own = slice.ids.flatMap((id) => (Object.hasOwn(traces, id) ? [[id, traces[id]!] as const] : []));
  return own.length > 0 ? { ...slice, traces: Object.fromEntries(own) } : slice;
}

/**
 * Settles a failed slice by its plan: dead letters first (in the batcher's slot), then, fenced
 * by the lock in the key's slot, the parts to retry and the in-flight ids dropped, or, for a slice
 * whose handler reported only some ids failed, the others acked in that same call. A crash in
 * between leaves the ids in flight as well as dead: they run again (at least once, never lost).
 * If the fenced call refuses (the lock was lost), the letters are taken back, restoring any they
 * replaced, and only a failure that stands applies the cap, so a fenced-out holder neither
 * removes nor evicts a real letter.
 * @internal
 */
export async function settleFailure(deps: FailureDeps, session: KeySession, failed: FailedSlice): Promise<boolean> {
  const { options, events } = deps;
  const { slice, error } = failed;
  const plan = failed.failures
    ? planOutcomes(slice.ids, failed.failures, failed.previous, options, Date.now())
    : planFailure(slice.ids, failed.previous, error, options, Date.now());
  const serialized = serializeError(error);
  const own = plan.errors && plan.dead.map((id) => serializeError(plan.errors!.get(id)));
  const letters = plan.dead.length > 0 ? await deps.deadLetters.add(slice.key, plan, serialized, failed.payloadsJson, own) : undefined;
  const retry = plan.retry.map((part, i) => ({
    id: `${failed.sliceId}:${i}`,
    delayMs: part.delayMs,
    slice: JSON.stringify(withTraces(part.slice, failed.traces)),
  }));
  const stands = await session.fail({
    lane: failed.lane,
    plan: {
      retry,
      dead: { ids: plan.dead, message: serialized.message, ...(own && { messages: own.map((e) => e.message) }) },
      ...(plan.acked ? { ack: true as const } : {}),
    },
    maxTicketErrors: MAX_TICKET_ERRORS,
    settleId: `${failed.sliceId}:failed`,
  });
  if (!stands) {
    // The next holder restores these ids and runs them again: their letters would be stale.
    if (letters) await deps.deadLetters.undo(letters);
    return false;
  }
  if (letters) await deps.deadLetters.trim();
  // A slice that reported its failed ids is reported as those ids (its others emit slice:done).
  const ids = failed.failures ? slice.ids.filter((id) => failed.failures!.has(id)) : slice.ids;
  // Built before slice:failed is emitted: its listeners get `dead` and `errors` to do with as they like.
  const deaths = deadEvents(slice.key, plan, error);
  const line = failed.failures ? reportedLine(error) : thrownLine(plan.outcome, error);
  log(options.logger, line.level, line.message, {
    ...line.meta,
    key: slice.key,
    ids: ids.length,
    ...(plan.acked !== undefined && { acked: plan.acked }),
    attempt: slice.attempt,
    outcome: plan.outcome,
  });
  events.emit('slice:failed', {
    ...slice,
    ids,
    durationMs: failed.durationMs,
    error: asError(error),
    outcome: plan.outcome,
    dead: plan.dead,
    ...(plan.retryInMs !== undefined && { retryInMs: plan.retryInMs }),
    ...(failed.failures && { errors: new Map([...failed.failures].map(([id, own]) => [id, asError(own)])) }),
    ...(plan.acked !== undefined && { acked: plan.acked }),
  });
  for (const death of deaths) events.emit('dead', death);
  return true;
}

type FailureLine = { level: 'info' | 'warn' | 'error'; message: string; meta: { err: unknown } | { error: string } };

/** A slice that threw (or timed out) is an incident: a warning with the error, and its stack, while it is retried. */
function thrownLine(outcome: FailureOutcome, error: unknown): FailureLine {
  return { level: outcome === 'retry' ? 'warn' : 'error', message: 'batch-by-key: slice failed', meta: { err: error } };
}

/**
 * Ids the handler reported with `ctx.fail` are an outcome it expected, not an incident: one info
 * line per slice with the first error's message and no stack (each id's error is in the
 * `slice:failed` event's `errors`, and in its dead letter).
 */
function reportedLine(first: unknown): FailureLine {
  const error = first instanceof Error ? textOf(() => first.message) : textOf(() => first);
  return { level: 'info', message: 'batch-by-key: ids reported failed', meta: { error } };
}

/** The `dead` events of a failure: none, one, or, for ids that died of their own errors, one per error. */
function deadEvents(key: string, plan: FailurePlan, error: unknown): BatcherEvents['dead'][0][] {
  const byError = new Map<unknown, Id[]>();
  for (const id of plan.dead) {
    const own = plan.errors ? plan.errors.get(id) : error;
    const group = byError.get(own);
    if (group) group.push(id);
    else byError.set(own, [id]);
  }
  return [...byError].map(([own, ids]) => ({ key, ids, error: asError(own), attempts: plan.attempts }));
}

/** Whether a slice that has failed `attempts` runs is retried whole (rather than split or dead). */
export function mayRetry(attempts: number, isolating: boolean, policy: FailurePolicy): boolean {
  return !isolating && attempts < policy.attempts;
}

/**
 * Error texts are cut to these many UTF-16 code units before they are written to Redis (dead
 * letters, a ticket's errors): a 1 MB message on a 100-id slice would otherwise cost Redis
 * 100 MB and more. Documented in docs/failures-and-flow.md.
 */
export const MAX_ERROR_TEXT = { name: 200, message: 2_000, stack: 2_000 } as const;

/**
 * What a dead letter (and a ticket's errors) keeps of an error (anything may be thrown): well-formed
 * and capped. It never throws: an error whose getters throw is still the slice's failure, not
 * Redis trouble (which would run the slice again as if its run had died).
 */
export function serializeError(error: unknown): SerializedError {
  const cap = MAX_ERROR_TEXT;
  if (error instanceof Error) {
    const stack = textOf(() => error.stack ?? '');
    return {
      name: wellFormedText(
        textOf(() => error.name),
        cap.name,
      ),
      message: wellFormedText(
        textOf(() => error.message),
        cap.message,
      ),
      ...(stack && { stack: wellFormedText(stack, cap.stack) }),
    };
  }
  return {
    name: typeof error,
    message: wellFormedText(
      textOf(() => error),
      cap.message,
    ),
  };
}

/** What a backoff function that returns no finite number gets: the default backoff's first delay. */
const GARBAGE_BACKOFF_MS = 1_000;

/**
 * Milliseconds to wait before a slice runs again after its `attempt`-th run failed, at most
 * `MAX_TIMER_MS` (an exponential backoff without `maxDelayMs` would otherwise overflow to Infinity).
 */
export function backoffDelay(backoff: Backoff, attempt: number, error: unknown): number {
  if (typeof backoff === 'function') {
    const ms = customBackoff(backoff, attempt, error);
    // A custom function that returns garbage must not make a failing key spin.
    return Number.isFinite(ms) ? Math.min(MAX_TIMER_MS, Math.max(0, ms)) : GARBAGE_BACKOFF_MS;
  }
  if (backoff.type === 'fixed') return backoff.delayMs;
  const exp = backoff.delayMs * 2 ** (attempt - 1);
  return Math.min(exp, backoff.maxDelayMs ?? MAX_TIMER_MS, MAX_TIMER_MS);
}

/**
 * A custom backoff's answer; NaN (garbage) when it throws: its throw would otherwise fail the
 * settling of the slice, and the slice would run again as if its run had died, its failure unrecorded.
 */
function customBackoff(backoff: (attempt: number, error: unknown) => number, attempt: number, error: unknown): number {
  try {
    return backoff(attempt, error);
  } catch {
    return Number.NaN;
  }
}
