import { DelayedError, type Job } from '../bullmq';
import { CallbackFailedError, CallbackTimeoutError, describe, InvalidOptionError, ShutdownError } from '../core/errors';
import { withDeadline } from '../core/deadline';
import { Stop, type CancelSource } from '../core/stop';
import { log } from '../core/logger';
import { progress } from '../push/progress';
import type { TicketDeps } from '../storage/ticket-outbox';
import type { Key, Logger, Ticket, TicketOutcome } from '../core/types';

/**
 * Runs a ticket's callback job, bounded as a slice is: the callback gets a signal that aborts
 * with a CallbackTimeoutError after `timeoutMs` (then the job fails that attempt, and BullMQ
 * retries it) or with a ShutdownError when the worker closes (then the job goes back to wait,
 * no attempt spent, and `worker.close()` does not wait for a callback that never settles).
 * Without a callback in this worker it fails (BullMQ retries it, perhaps on a worker that has one).
 */
export async function runTicketCallback(
  deps: TicketDeps,
  job: Job<{ key: Key; ticket?: Ticket }>,
  token: string,
  cancel: CancelSource | undefined,
  callback: ((outcome: TicketOutcome, ticket: Ticket, signal: AbortSignal) => unknown) | undefined,
  options: { timeoutMs: number; logger: Logger },
): Promise<void> {
  const ticket = job.data.ticket;
  if (ticket === undefined) throw new InvalidOptionError('a ticket callback job without a ticket');
  if (!callback) {
    throw new InvalidOptionError(`ticket ${ticket} settled and asked for a callback, but this worker's batcher has no onTicketSettled`);
  }
  const p = await progress(deps.client, deps.keyspace, ticket);
  log(options.logger, 'debug', 'batch-by-key: ticket settled, running its callback', { ticket });
  // The callback's signal follows BullMQ's (a shutdown) as a run's does, and its timeout.
  const stop = new Stop(cancel);
  const signal = stop.signal;
  const closing = new Promise<'closing'>((resolve) => {
    const onAbort = () => signal.reason instanceof ShutdownError && resolve('closing');
    if (signal.aborted) onAbort();
    else signal.addEventListener('abort', onAbort, { once: true });
  });
  const call = Promise.resolve()
    .then(() => callback({ ...p, ticket, success: p.failed === 0 && p.dropped === 0 }, ticket, signal))
    .catch((thrown: unknown) => {
      // BullMQ's failure handling reads the error's fields: a bare `undefined` would break it.
      throw thrown instanceof Error
        ? thrown
        : new CallbackFailedError(`onTicketSettled for ticket ${ticket} threw ${describe(thrown)}`, thrown);
    });
  const ended = await withDeadline(Promise.race([call.then(() => 'done' as const), closing]), options.timeoutMs, () => {
    const error = new CallbackTimeoutError(`onTicketSettled for ticket ${ticket} ran longer than sliceTimeoutMs (${options.timeoutMs} ms)`);
    stop.abort(error);
    return error;
  });
  if (ended === 'closing') {
    // The callback is abandoned, not failed: it runs again, whole, on a worker that stays.
    call.catch(() => undefined);
    await job.moveToDelayed(Date.now(), token);
    throw new DelayedError();
  }
}
