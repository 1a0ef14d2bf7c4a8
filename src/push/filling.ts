import type { Key } from '../core/types';

/** The most keys remembered: past it, the key remembered longest ago is forgotten. */
const MAX_KEYS = 10_000;

/**
 * Keys this process's pushes found waiting to fill with their job due by then, and until when (by
 * this process's clock). A push to one sends no BullMQ add: its call finds the key covered, and
 * building the add would cost the pusher 13–20 µs (BullMQ's Job.addJob, measured per push) on
 * every push of a wait, for the one that adds the job. Only a hint: a key whose job ran early (a
 * push filled it) costs the push that finds it so a second call, its job added after it
 * (enqueue.ts), as every push to a waiting key cost before.
 */
export class FillingKeys {
  private readonly until = new Map<Key, number>();

  /** Whether `key` was seen waiting to fill, its job due later than now. */
  covers(key: Key): boolean {
    const until = this.until.get(key);
    return until !== undefined && until > Date.now();
  }

  /** What a push to `key` found: its ids wait `waitMs` more, with a job due by then (0 or less: none wait). */
  saw(key: Key, waitMs: number): void {
    if (waitMs <= 0) {
      this.until.delete(key);
      return;
    }
    if (this.until.size >= MAX_KEYS && !this.until.has(key)) this.until.delete(this.until.keys().next().value!);
    this.until.set(key, Date.now() + waitMs);
  }
}
