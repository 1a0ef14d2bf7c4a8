import { ShutdownError } from './errors';

/**
 * What a Stop reads of its job's cancellation from outside (a worker closing, a lost BullMQ job
 * lock, cancelJob): BullMQ's AbortSignal for the job, or engine/cancels.ts's lighter JobCancel.
 */
export interface CancelSource {
  readonly aborted: boolean;
  readonly reason: unknown;
  addEventListener(type: 'abort', listener: () => void, options: { once: true }): void;
}

/**
 * A run's stop (or a lane's, which follows its run's; or a ticket callback's): aborted once, with a reason, by a lost
 * lock, a shutdown (its job's cancellation, `source`) or a slice's timeout. Its AbortSignal
 * is made only when read (a handler that reads ctx.signal): an AbortController and a listener on
 * the job's cancellation per run cost a small key's run a few percent of its CPU, and most
 * handlers never look. Until then the cancellation is polled where the run asks (`aborted`).
 */
export class Stop {
  private controller: AbortController | undefined;
  private why: { reason: unknown } | undefined;
  private followers: Stop[] | undefined;
  private relaying = false;
  private watcher: (() => void) | undefined;

  /** `source`: the job's cancellation (a shutdown, a lost job lock, or cancelJob); `parent`: the run's stop, for a lane's. */
  constructor(
    private readonly source?: CancelSource,
    private readonly parent?: Stop,
  ) {
    if (parent) (parent.followers ??= []).push(this);
  }

  get aborted(): boolean {
    if (!this.why) this.poll();
    return this.why !== undefined;
  }

  get reason(): unknown {
    return this.aborted ? this.why!.reason : undefined;
  }

  abort(reason: unknown): void {
    if (this.why) return;
    this.why = { reason };
    this.controller?.abort(reason);
    const watcher = this.watcher;
    this.watcher = undefined;
    watcher?.();
    for (const follower of this.followers ?? []) follower.abort(reason);
  }

  /**
   * Calls `listener` when this stop aborts, as it happens (undefined clears it; one at a time):
   * a slice's wait uses it to start its shutdown deadline (see engine/iteration.ts). Lighter than the
   * signal: no AbortController, one listener on the job's cancellation per run.
   */
  watch(listener: (() => void) | undefined): void {
    this.watcher = listener;
    if (listener) this.relay();
  }

  /** The signal handlers see as ctx.signal, made on first read and aborted with this stop. */
  get signal(): AbortSignal {
    if (!this.controller) {
      this.controller = new AbortController();
      if (this.aborted) this.controller.abort(this.why!.reason);
      else this.relay();
    }
    return this.controller.signal;
  }

  /** From now on the job's cancellation aborts the run (and its lanes) when it fires, not only when polled. */
  private relay(): void {
    if (this.parent) return this.parent.relay();
    if (this.relaying || !this.source) return;
    this.relaying = true;
    this.source.addEventListener('abort', () => this.poll(), { once: true });
  }

  private poll(): void {
    if (this.parent?.aborted) this.abort(this.parent.reason);
    else if (this.source?.aborted)
      this.abort(new ShutdownError(`the worker is closing or cancelled the job: ${String(this.source.reason)}`));
  }
}
