import type { Job, Processor } from 'bullmq';

/**
 * A processor that BullMQ hands a cancellation signal: BullMQ passes its AbortSignal only to a
 * processor that declares three parameters or more, and builds an AbortController per job for it
 * (bullmq `src/classes/worker.ts`, `processorAcceptsSignal = processor.length >= 3`).
 */
export function processorWithSignal<D, R, N extends string>(
  run: (job: Job<D, R, N>, token: string | undefined, signal: AbortSignal | undefined) => Promise<R>,
): Processor<D, R, N> {
  return (job, token, signal) => run(job, token, signal);
}

/** A processor that BullMQ hands no signal, so builds no AbortController per job (see `processorWithSignal`). */
export function processorWithoutSignal<D, R, N extends string>(
  run: (job: Job<D, R, N>, token: string | undefined) => Promise<R>,
): Processor<D, R, N> {
  return (job, token) => run(job, token);
}
