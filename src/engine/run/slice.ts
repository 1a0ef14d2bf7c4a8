import { RateLimitedError, SliceCrashedError } from '../../core/errors';
import type { Stop } from '../../core/stop';
import type { Id, SliceInfo } from '../../core/types';
import type { Traces } from '../../storage/protocol';
import { afterFailure, type RunOutcome } from '../decisions';
import { mayRetry, settleFailure, type FailedSlice, type RetrySlice } from '../failures';
import { stopReasonOf } from '../interrupt';
import { runHandler, SliceContext, SliceFailure } from '../iteration';
import type { RunState } from './state';

/** What a lane's claim gave its slice to run. */
export interface ClaimedSlice {
  ids: Id[];
  retry?: RetrySlice;
  waitedMs?: number;
  payloadsJson?: string;
  traces?: Traces;
}

/**
 * Runs one claimed slice of lane `lane` with `signal` (its lane's stop) and settles it: its ids
 * counted and its `slice:done` emitted, or its failure (see failures.ts) retried, split or
 * dead-lettered. An outcome when the slice ends the run; Redis trouble in a settle is thrown (the
 * run's safety net retries the run).
 */
export async function runSlice(
  run: RunState,
  lane: number,
  signal: Stop,
  claimed: ClaimedSlice,
  sliceId: string,
): Promise<RunOutcome | undefined> {
  const { env, job, session } = run;
  const key = session.key;
  const slice: SliceInfo = { key, ids: claimed.ids, attempt: (claimed.retry?.attempts ?? 0) + 1, job };
  // A failed slice run again carries its ids' trace context in its JSON; pending ids, in the claim's reply.
  const traces = claimed.retry ? claimed.retry.traces : claimed.traces;
  const crashed = claimed.retry?.crashed ? claimed.retry : undefined;
  if (crashed && !mayRetry(crashed.attempts, crashed.isolating, env.options)) {
    // Its death was its last allowed run (a poison id that kills the worker): settle it as that
    // failure, which splits or dead-letters it, rather than run it to die once more.
    const error = new SliceCrashedError(
      `the run of this slice of key ${JSON.stringify(key)} died before it finished (a crash, an OOM kill, a lost lock)`,
    );
    const previous = { ...crashed, attempts: crashed.attempts - 1 };
    const stands = await failed(run, {
      slice,
      previous,
      error,
      sliceId,
      lane,
      durationMs: 0,
      payloadsJson: claimed.payloadsJson,
      traces,
    });
    return stands ? undefined : { kind: 'lock_lost' };
  }
  const started = performance.now();
  try {
    const failures = await runHandler(run.handler, env.options, new SliceContext(slice, signal, claimed.payloadsJson, traces), signal);
    const durationMs = performance.now() - started;
    const acked = failures
      ? await partly(
          run,
          { slice, previous: claimed.retry, sliceId, lane, durationMs, payloadsJson: claimed.payloadsJson, traces },
          failures,
        )
      : slice.ids;
    if (!acked) return { kind: 'lock_lost' };
    if (acked.length === 0) return undefined;
    env.events.processed(acked.length);
    if (env.events.wants('slice:done')) {
      env.events.emit('slice:done', {
        ...slice,
        ids: acked,
        durationMs,
        ...(claimed.waitedMs !== undefined && { waitedMs: claimed.waitedMs }),
      });
    }
    return undefined;
  } catch (thrown) {
    // Redis trouble in a claim is not the slice's fault: the safety net in `run` retries the run.
    if (!(thrown instanceof SliceFailure)) throw thrown;
    // A stop's give-up or a retryAfter is no failure (see decisions.ts `afterFailure`).
    const stopping = afterFailure(stopReasonOf(run.stop), thrown.error);
    if (thrown.error instanceof RateLimitedError && thrown.error.scope === 'batcher') await env.limits.hold(thrown.error.retryAfterMs);
    if (stopping) return stopping;
    const failedSlice = {
      slice,
      previous: claimed.retry,
      error: thrown.error,
      sliceId,
      lane,
      durationMs: performance.now() - started,
      payloadsJson: claimed.payloadsJson,
      traces,
    };
    if (!(await failed(run, failedSlice))) return { kind: 'lock_lost' };
    // Not stopping, so a timeout aborted it. The abandoned handler may still run; a fresh run
    // gets a fresh signal.
    if (signal.aborted) return { kind: 'stopped', reason: 'slice_timeout' };
    return undefined;
  }
}

/**
 * Settles a slice whose handler returned having reported some ids failed (`ctx.fail`): one fenced
 * call acks the others and retries or dead-letters those (see failures.ts `planOutcomes`). The
 * ids acked, or undefined when the lock was lost first.
 */
async function partly(
  run: RunState,
  slice: Omit<FailedSlice, 'error' | 'failures'>,
  failures: ReadonlyMap<Id, unknown>,
): Promise<readonly Id[] | undefined> {
  const [first] = failures.values();
  if (!(await failed(run, { ...slice, error: first, failures }))) return undefined;
  return slice.slice.ids.filter((id) => !failures.has(id));
}

/** Retries, splits or dead-letters a failed slice (see failures.ts); false when the lock was lost first. */
function failed(run: RunState, slice: FailedSlice): Promise<boolean> {
  return settleFailure(run.env, run.session, slice);
}
