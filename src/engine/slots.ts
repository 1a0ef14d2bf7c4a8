/**
 * One concurrency budget for the workers of every shard of a batcher made by one `createWorker`
 * (see shard-worker.ts): a slot is taken before a job is fetched, kept while the job runs (and
 * handed on to the next job its completion fetches), and given back when a fetch finds nothing or
 * a job ends without a next one. Waiting shards get slots first come, first served, and while
 * any shard waits no completion fetches a next job of its own shard (`contended`): a shard with a
 * backlog cannot keep every slot, and a slot that frees goes to the shard that waited longest.
 * A wait ends when a slot frees or when its worker stops waiting (`cancel`: closing, pausing).
 *
 * A limit lowered at run time leaves more slots in use than it allows: no slot is taken or handed
 * on while it does (`over`), and each running job asks before its next slice whether it must end
 * to bring them down (`shed`); those that must are counted as leaving until their job ends
 * (`left`), so that only as many end as the limit needs, however many ask at once.
 * @internal
 */
export class SlotBudget {
  private used = 0;
  /** Slots of jobs ending for a lowered limit (see `shed`): still in use, but running no more slices. */
  private leaving = 0;
  private readonly waiting: Array<{ owner: object; grant: (granted: boolean) => void }> = [];

  /** `limit` is read whenever a slot could be granted: a concurrency changed at run time applies from the next take or give. */
  constructor(private readonly limit: () => number) {}

  /** A slot if one is free and no one waits for one (they come first). */
  tryTake(): boolean {
    if (this.waiting.length > 0 || this.used >= this.limit()) return false;
    this.used++;
    return true;
  }

  /** Resolves true with a slot, or false when `cancel(owner)` ended the wait. An owner waits once at a time. */
  take(owner: object): Promise<boolean> {
    if (this.tryTake()) return Promise.resolve(true);
    const granted = new Promise<boolean>((grant) => this.waiting.push({ owner, grant }));
    this.grantWaiting();
    return granted;
  }

  /** Gives a slot back: to the longest waiter, if any, else to the pool. */
  give(): void {
    this.used--;
    this.grantWaiting();
  }

  /** Whether a shard's worker waits for a slot: completions then fetch no next job, so their slots free. */
  get contended(): boolean {
    return this.waiting.length > 0;
  }

  /** Whether the slots of jobs not leaving are more than the limit (lowered at run time): a completion then gives its slot back. */
  get over(): boolean {
    return this.used - this.leaving > this.limit();
  }

  /** Whether one more running job must end to honour a lowered limit; if so, it counts as leaving until `left`. */
  shed(): boolean {
    if (!this.over) return false;
    this.leaving++;
    return true;
  }

  /** A job `shed` sent away has ended (its slot is given back, or handed on, as any job's). */
  left(): void {
    this.leaving--;
  }

  /** Ends `owner`'s wait, if it waits, with no slot. */
  cancel(owner: object): void {
    const at = this.waiting.findIndex((w) => w.owner === owner);
    if (at >= 0) this.waiting.splice(at, 1)[0]!.grant(false);
  }

  private grantWaiting(): void {
    while (this.waiting.length > 0 && this.used < this.limit()) {
      this.used++;
      this.waiting.shift()!.grant(true);
    }
  }
}
