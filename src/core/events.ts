import { EventEmitter } from 'node:events';
import { log } from './logger';
import type { BatcherEvents, Logger } from './types';

type Listener<E extends keyof BatcherEvents> = (...args: BatcherEvents[E]) => void;

/**
 * The batcher's events. A listener that throws is logged and skipped: an event is a report on a
 * slice, and must not turn into that slice's failure.
 */
export class BatcherEmitter {
  private readonly emitter = new EventEmitter();

  constructor(private readonly logger: Logger) {}

  on<E extends keyof BatcherEvents>(event: E, listener: Listener<E>): void {
    this.emitter.on(event, listener as (...args: unknown[]) => void);
  }

  off<E extends keyof BatcherEvents>(event: E, listener: Listener<E>): void {
    this.emitter.off(event, listener as (...args: unknown[]) => void);
  }

  private readonly counters = new Set<(ids: number) => void>();

  /**
   * Counts the ids of each successful slice, for counters that need no event object (the
   * history's ids per second): a call per slice, nothing built. Returns the unsubscribe.
   */
  onProcessed(count: (ids: number) => void): () => void {
    this.counters.add(count);
    return () => this.counters.delete(count);
  }

  processed(ids: number): void {
    for (const count of this.counters) count(ids);
  }

  /** Whether anyone listens; lets the hot path skip building an event nobody reads. */
  wants(event: keyof BatcherEvents): boolean {
    return this.emitter.listenerCount(event) > 0;
  }

  emit<E extends keyof BatcherEvents>(event: E, ...args: BatcherEvents[E]): void {
    for (const listener of this.emitter.listeners(event)) {
      try {
        (listener as Listener<E>)(...args);
      } catch (err) {
        log(this.logger, 'warn', `batch-by-key: a '${event}' listener threw`, { err });
      }
    }
  }
}
