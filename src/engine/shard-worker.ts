import {
  fetchBeforeBlocking,
  HookedWorker,
  type BackendFactory,
  type Job,
  type Processor,
  type RedisQueueBackend,
  type WorkerOptions,
} from '../bullmq';
import type { EventEmitter } from 'node:events';
import type { SlotBudget } from './slots';
import type { KeyJobData, KeyWorker } from '../core/types';

type KeyJob = Job<KeyJobData, void, string>;

/** The queue a worker serves: shard `index` of a batcher's layout of `count` shards (see storage/shards.ts). */
export interface ShardRef {
  readonly count: number;
  readonly index: number;
}

/** A follower's job events, re-emitted by its leader so that listeners on the worker `createWorker` returned see every shard's. */
const FORWARDED = ['active', 'completed', 'failed', 'progress', 'stalled', 'error'] as const;

/**
 * A BullMQ Worker of one shard's queue that takes its slots from a budget it shares with the
 * workers of the batcher's other shards (see slots.ts): a slot before each fetch, given back
 * when the fetch finds nothing or a job ends without a next one; and while another shard waits
 * for a slot, a completion fetches no next job, so that slot goes to the shard that waited.
 *
 * `createWorker` returns the worker of shard 0, the leader: the other shards' workers are its
 * followers, closed, paused, resumed and run with it, their job events re-emitted on it. The
 * leader's `concurrency` is the budget's size. With one shard there are no followers and the
 * budget is the leader's own concurrency: a plain BullMQ worker.
 *
 * A concurrency lowered while jobs run is honoured at each run's next slice boundary: before
 * every slice a run asks `shed`, and the runs beyond the new concurrency hand their job back
 * instead (see slots.ts), so the slices that start after the change never run more at once than
 * it allows, and once the slices running at the change have ended, no more run at all.
 */
export class ShardWorker extends HookedWorker<KeyJobData, void> implements KeyWorker {
  /** Set only after the constructor (which may call `run`): by shard, `${count}.${index}`. */
  private followers: Map<string, ShardWorker> | undefined;
  /** The tokens of jobs being processed: a fetch under one of them takes over that job's slot. */
  private readonly ending = new Set<string>();
  /** Jobs this worker fetched (each with a slot) that BullMQ's loop has not started yet. */
  private unstarted = 0;
  /** The tokens of jobs whose runs end for a lowered concurrency (see `shed`). */
  private readonly leaving = new Set<string>();

  constructor(
    name: string,
    processor: Processor<KeyJobData, void, string>,
    opts: WorkerOptions,
    factory: BackendFactory<RedisQueueBackend>,
    readonly shard: ShardRef,
    private readonly slots: SlotBudget,
  ) {
    super(name, processor, opts, factory);
  }

  /** This worker and its followers: one per shard served. */
  get shardWorkers(): readonly ShardWorker[] {
    return [this, ...this.others()];
  }

  /**
   * Serves every shard of these counts and of its own: a follower made by `make` for each shard
   * not served yet (it runs at once if this worker runs), and the followers of counts no longer
   * listed closed (they fetch no more; their running jobs finish first).
   */
  async serveOnly(counts: readonly number[], make: (shard: ShardRef) => ShardWorker): Promise<void> {
    if (this.closing) return;
    const keep = new Set([...counts, this.shard.count]);
    for (const count of keep) {
      for (let index = 0; index < count; index++) {
        const id = shardId({ count, index });
        if (id !== shardId(this.shard) && !this.followers?.has(id)) this.follow(make({ count, index }));
      }
    }
    await Promise.all(
      this.others()
        .filter((w) => !keep.has(w.shard.count))
        .map((w) => w.close()),
    );
  }

  private follow(worker: ShardWorker): void {
    const id = shardId(worker.shard);
    (this.followers ??= new Map()).set(id, worker);
    const from = worker as unknown as EventEmitter;
    for (const event of FORWARDED) from.on(event, (...args: unknown[]) => (this as unknown as EventEmitter).emit(event, ...args));
    worker.on('closed', () => this.followers?.delete(id));
    if (this.isRunning()) worker.run().catch((err: unknown) => worker.emit('error', err as Error));
  }

  override async run(): Promise<void> {
    const idle = this.others().filter((w) => !w.isRunning());
    await Promise.all([super.run(), ...idle.map((w) => w.run())]);
  }

  /**
   * Pauses every shard's worker. Their runs stop after their current slice (BullMQ waits for
   * active jobs, and a key's job is active for its whole budget) and their keys are requeued.
   */
  override async pause(doNotWaitActive?: boolean): Promise<void> {
    const paused = this.overtakenByClose(super.pause(doNotWaitActive));
    this.cancelAllJobs('worker pausing');
    this.slots.cancel(this);
    await Promise.all([paused, ...this.others().map((w) => w.pause(doNotWaitActive))]);
  }

  /**
   * A pause that a close overtakes resolves once the close has ended (its bound, worker-close.ts,
   * included): the worker takes no more jobs, which is what the pause was for. BullMQ's pause,
   * once the running jobs are done, reconnects the blocking connection the close has ended: it
   * rejected with ioredis' "Connection is closed.", or, Redis away, waited for ever for that
   * connection's end. (`close()` gives every call its first call's promise.)
   */
  private async overtakenByClose(pausing: Promise<void>): Promise<void> {
    let onClosing: (() => void) | undefined;
    const closed = this.closing
      ? this.close()
      : new Promise<void>((resolve) => this.once('closing', (onClosing = () => void this.close().then(resolve, resolve))));
    try {
      await Promise.race([
        pausing.catch(async (err: unknown) => {
          if (!this.closing) throw err;
          await closed;
        }),
        closed,
      ]);
    } finally {
      if (onClosing) this.off('closing', onClosing);
    }
  }

  /**
   * Resumes every shard's worker, each looking for a job at once: a delayed job that came due
   * during the pause (a zset time, a wait to fill) runs now, not after BullMQ's blocking wait.
   */
  override async resume(): Promise<void> {
    fetchBeforeBlocking(this);
    await Promise.all([super.resume(), ...this.others().map((w) => w.resume())]);
  }

  override async close(force = false): Promise<void> {
    const closed = super.close(force);
    this.slots.cancel(this);
    await Promise.all([closed, ...this.others().map((w) => w.close(force))]);
  }

  /**
   * A slot first; the job is fetched only with one, and the slot goes back if none was fetched.
   * A fetch BullMQ makes while it ends a job (after a job moved itself to delayed) gets that job's
   * slot instead (see `aroundProcess`). Without a free slot, a worker waits for one (and so counts
   * as contended), unless it has fetched jobs it has not started: BullMQ's loop awaits each fetch
   * before it starts the jobs fetched before it, so those would never start and free a slot. It
   * then fetches nothing for now, starts them, and asks again. A job that arrives while the wait is
   * on (the next job of a completion decided before the wait began) ends the wait the same way
   * (see `aroundProcess`). A worker pausing or closing fetches nothing.
   */
  protected override async aroundFetch(token: string, fetch: () => Promise<KeyJob | undefined>): Promise<KeyJob | undefined> {
    if (this.ending.has(token)) return fetch();
    if (!this.slots.tryTake()) {
      if (this.unstarted > 0 || this.closing || this.isPaused() || !(await this.slots.take(this))) return undefined;
    }
    let job: KeyJob | undefined;
    try {
      job = await fetch();
      if (job) this.unstarted++;
      return job;
    } finally {
      if (!job) this.slots.give();
    }
  }

  /** The job's slot passes to the next job its completion fetched, or goes back. */
  protected override async aroundProcess(
    _job: KeyJob,
    token: string,
    process: (mayFetchNext: () => boolean) => Promise<void | KeyJob>,
  ): Promise<void | KeyJob> {
    let next: void | KeyJob = undefined;
    this.unstarted--;
    this.ending.add(token);
    try {
      next = await process(() => this.mayFetchNext(token));
      if (next) {
        this.unstarted++;
        // The completion fetched it (with this job's slot) while this worker's loop may wait for
        // another slot; that loop must start it first: its lock is not renewed until it starts.
        this.slots.cancel(this);
      }
      return next;
    } finally {
      this.ending.delete(token);
      if (this.leaving.delete(token)) this.slots.left();
      if (!next) this.slots.give();
    }
  }

  /**
   * Whether the completion of the job under `token` (BullMQ's, or one in a claim: see
   * engine/claims/fused.ts) may fetch a next job with its slot: not while closing or paused, while another
   * shard waits for a slot, while a lowered concurrency leaves more slots in use than it allows,
   * nor for a job whose run ended for that.
   */
  mayFetchNext(token: string): boolean {
    return !(this.closing || this.isPaused() || this.slots.contended || this.slots.over || this.leaving.has(token));
  }

  /**
   * Whether the run of the job under `token` must hand its job back before its next slice, to
   * honour a concurrency lowered while it runs (its key's job is requeued, the slice it claimed
   * restored unrun). Asked before every slice; once true, true until the job ends.
   */
  shed(token: string): boolean {
    if (this.leaving.has(token)) return true;
    if (!this.slots.shed()) return false;
    this.leaving.add(token);
    return true;
  }

  private others(): ShardWorker[] {
    return [...(this.followers?.values() ?? [])];
  }
}

function shardId(shard: ShardRef): string {
  return `${shard.count}.${shard.index}`;
}
