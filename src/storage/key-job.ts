import { addKeysDerivable, BULLMQ_JOB_LISTS, captureAdd, Job, jobKey, prefixNaming, queuePrefix, type JobsOptions } from '../bullmq';
import { dueIn, type PushAdd, type PushResult } from './protocol';
import { callScript, type RedisClient } from './scripts';
import { JOB_NAME, type KeyNames } from './keys';
import { WAIT_LIST, type KeyQueue, type Level } from './job';
import type { Fill } from '../core/fill';
import type { Key, KeyJob, KeyJobData } from '../core/types';

/**
 * The one owner of a key's BullMQ job: every add of it, and every move, goes through here. A push
 * carries its add (`carried`) and settles what its call left (`afterPush`); a run hands the key on
 * to its next job (`handOn`) or waits in its own (`requeue`); the recovery sweep and `resume`
 * make sure the key has one (`ensure`).
 *
 * The pointer and its races, once for all of them. A key has at most one job that a worker will
 * run: the one its job pointer names (keys.ts `jobPointerOf`; scripts/includes/key-job.lua says
 * when a pointer names a job of the key's). Every add is made in the Lua call that reads the
 * pointer and writes it (push.lua for a push's carried add, add-job.lua for the rest), so two
 * adds never both find the key without a job, and no job that is not ours is taken for the key's,
 * nor moved:
 * - a waiting job is left as it is: it will claim whatever was pushed;
 * - a delayed job (backing off, waiting for a zset time or to fill) is moved to the add's time: for
 *   ids that are ready now, that brings it forward;
 * - an active job is never trusted to see new ids: its run may be past its last (empty) claim and
 *   about to complete it. A new job is added and the pointer names it; the active one ends as it
 *   would have. A push whose call found the key's lock held is covered by that run, which claims
 *   again before it releases (push.lua), and adds nothing.
 * So a run hands on by an add too, never by moving its own job after its release: a push that
 * found the lock free and the job active added the key's next job already, and a second would
 * have left the key two jobs waiting. Only a run whose job itself must wait (the batcher-wide
 * limits wake a refused key by its job's id) moves its own job (`requeue`), under its lock.
 *
 * Two moves of one delayed job are last writer wins. A zset push that read the key before another
 * push's earlier id landed, or a run's hand-on after a push that filled the key, can move the job
 * too late: each reads the key again after its own move and brings the job forward
 * (`afterPush`; a run's hand-on with `moved`). A push that stored ids and then failed to add the job leaves its key listed in
 * its recovery index, whose sweep adds it.
 */
export class KeyJobs {
  /** Keys this process's pushes saw waiting to fill with their job: a push to one carries no add. */
  private readonly filling = new FillingKeys();

  constructor(
    private readonly client: RedisClient,
    /** The queue a key's job is added to: its shard's, of this batcher's count. */
    private readonly queueOf: (key: Key) => KeyQueue,
  ) {}

  /**
   * Adds the key's job at `level`, due in `delayMs`, unless it has one; a delayed one is moved to
   * `delayMs`. One call (add-job.lua) in the queue's slot. Returns the id of the key's job.
   */
  async ensure(key: Key, delayMs: number, level: Level, queue: KeyQueue = this.queueOf(key)): Promise<string> {
    const add = capturedAdd(queue, key, delayMs, level);
    if (!add) return this.addThroughQueue(queue, key, delayMs, level);
    const values = { add: add.kind, queuePrefix: queuePrefix(queue), key, delayMs };
    const reply = await callScript(this.client, 'add-job', add.call.keys, values, add.call.args);
    await add.done(reply);
    return String(reply);
  }

  /**
   * `ensure` where the installed BullMQ builds an add this library does not know (so no script of
   * ours can make it inside its own call): BullMQ's public `Queue.add` adds the job, then
   * add-job.lua repoints the key at it unless the key has a job already, which it treats as
   * `ensure` does (a waiting one left, a delayed one moved to `delayMs`). Two calls, not one, so a
   * key may get a job more than it needs: that job finds the key's ids taken (or runs the ones
   * pushed since), under the key's lock as any run. Returns the id of the key's job.
   */
  async addThroughQueue(queue: KeyQueue, key: Key, delayMs: number, level: Level): Promise<string> {
    const job = await queue.add(JOB_NAME, { key }, jobOptions(delayMs, level));
    const added = job.id!;
    const values = { add: ADDED_BY_QUEUE, queuePrefix: queuePrefix(queue), key, delayMs };
    return String(await callScript(this.client, 'add-job', [jobKey(queue, added)], values, [added]));
  }

  /**
   * A run hands the key on to its next job, due in `delayMs` at `level`, and its own job completes
   * (the key's job after the run's release, or the one a push added meanwhile; see the class's
   * reasoning). A wait of at most PROMPT_WAKE_MS is ended by this process's timer too, and so is
   * a delayed job `moved` to an earlier time, which BullMQ would promote only at a worker's next
   * fetch.
   */
  async handOn(key: Key, delayMs: number, level: Level, { moved = false }: { moved?: boolean } = {}): Promise<KeyJob> {
    const queue = this.queueOf(key);
    const next: KeyJob = new Job<KeyJobData, void, string>(queue, JOB_NAME, { key }, {}, await this.ensure(key, delayMs, level, queue));
    if ((delayMs > 0 || moved) && delayMs <= PROMPT_WAKE_MS) wakeWhenDue(next, delayMs);
    return next;
  }

  /**
   * Moves a run's own job to delayed, due in `delayMs` (with 0 it is promoted behind every job
   * already waiting): only where the job itself must wait, under the run's lock (see the class's
   * reasoning). The caller then throws BullMQ's DelayedError, so that BullMQ leaves the job there.
   */
  async requeue(job: KeyJob, token: string, delayMs: number): Promise<void> {
    await job.moveToDelayed(Date.now() + delayMs, token);
  }

  /**
   * Promotes the job `jobId` that a run requeued to wait for the batcher-wide limits, now that
   * they have room (global-limits.ts wakes waiters by their job). A job no longer delayed refuses
   * the promote: the caller hears it.
   */
  static async wake(queue: KeyQueue, jobId: string): Promise<void> {
    await (await queue.getJob(jobId))?.promote();
  }

  /**
   * BullMQ's add of the key's job for a push to carry into its own call (push.lua makes it there,
   * if the key needs one): its standard add where the job may start now (`waitsToFillMs`
   * undefined), at the wait list's level only, or its delayed add of `waitsToFillMs` for a key
   * whose ids wait to fill, unless a push of this process saw the key waiting with its job
   * (building an add costs the pusher CPU). Undefined where the push carries none: then its job is
   * added after its call, if it needs one (`afterPush`).
   */
  carried(queue: KeyQueue, key: Key, level: Level, waitsToFillMs: number | undefined): CarriedAdd | undefined {
    if (waitsToFillMs === undefined) return level === WAIT_LIST ? pushAdd(queue, key, 0, level) : undefined;
    return this.filling.covers(key) ? undefined : pushAdd(queue, key, waitsToFillMs, level);
  }

  /**
   * What a push's call left its key's job to, once its ids are stored: BullMQ reads the reply of
   * the add the push carried; a key that no run covers and whose call added no job gets it now,
   * due when its ids are (`pushed.waitMs`). A zset key's is then read again, and its job brought
   * forward while an id is due sooner (moves are last writer wins: see the class's reasoning).
   */
  async afterPush(push: PushedKey, add: CarriedAdd | undefined, pushed: PushResult): Promise<void> {
    await add?.done(pushed.added ?? null);
    if (pushed.covered || pushed.added !== undefined) return this.saw(push, pushed);
    // Not for a list's or set's wait to fill, to spare a call: its job's time is its oldest id's,
    // whichever push sets it, and a push that fills the key adds or brings the job forward itself.
    // Only when that lands between this push's call and this add to a job that was active or
    // delayed past this push's time can this add move it back, to this push's time: the key then
    // starts at most maxWaitMs late.
    let waitMs = Math.max(0, pushed.waitMs);
    for (let moves = 0; ; moves++) {
      const dueAt = Date.now() + waitMs;
      await this.ensure(push.key, waitMs, push.level, push.queue);
      if (!push.zset || moves === MAX_BRING_FORWARD) return this.saw(push, pushed);
      waitMs = await dueIn(this.client, 'zset', push.zset.names, push.zset.fill);
      if (waitMs < 0 || Date.now() + waitMs >= dueAt - RESCHEDULE_TOLERANCE_MS) return;
    }
  }

  /**
   * Removes the key's job `jobId` (its pointer's, read by an operator's drop) if it is still
   * this key's and has not ended, through BullMQ's public remove, which refuses an active job: its
   * run lost the key's lock to the drop and ends by itself. Whether it went.
   */
  async remove(key: Key, jobId: string): Promise<boolean> {
    const queue = this.queueOf(key);
    const job = await queue.getJob(jobId);
    if (job?.name !== JOB_NAME || job.data?.key !== key || job.finishedOn !== undefined) return false;
    return (await queue.remove(jobId)) === 1;
  }

  /** Remembers what a push to a key that may wait to fill found (see `FillingKeys`). */
  private saw(push: PushedKey, pushed: PushResult): void {
    if (push.mayFill) this.filling.saw(push.key, pushed.waitMs);
  }
}

/**
 * The key of a push whose call is answered, for `afterPush`: its queue, its job's level, for a zset
 * key its names, and whether it is a list's or set's key with a wait to fill whose push made its
 * call with its job's add (`KeyJobs.carried`), whose pushes remember it waiting.
 */
export interface PushedKey {
  key: Key;
  queue: KeyQueue;
  level: Level;
  zset?: { names: KeyNames; fill: Fill | undefined };
  mayFill?: boolean;
}

/** BullMQ's add of a key's job that a push carries (`KeyJobs.carried`). */
export type CarriedAdd = PushAdd & { done: (reply: unknown) => Promise<void> };

/**
 * Waits up to this long are ended by a timer of the worker that set them, as well as by BullMQ.
 * A worker blocked on BullMQ's marker wakes for a delayed job only at a timeout, which Redis
 * serves on its timer tick (100 ms at the default `hz` 10): a key waiting out a 100 ms rate-limit
 * window waited up to twice that, and ran at half its limit.
 */
const PROMPT_WAKE_MS = 1_000;

/**
 * Promotes the delayed job when its delay ends (a ms late, so the key's hold, timed by Redis,
 * has ended too). If this worker dies first, or the job moved meanwhile, BullMQ's own promotion
 * still runs it; a promote that finds it no longer delayed changes nothing.
 */
function wakeWhenDue(job: KeyJob, delayMs: number): void {
  setTimeout(() => void job.promote().catch(() => undefined), delayMs + 1).unref();
}

/** add-job.lua's `add` for a job `Queue.add` added already (its id the only argument after the named ones). */
const ADDED_BY_QUEUE = 'added';

/** A zset key's job is correct to within this much; closer readings are clock noise. */
const RESCHEDULE_TOLERANCE_MS = 20;
/** A push brings its zset key's job forward at most this many times after its own add. */
const MAX_BRING_FORWARD = 2;

/**
 * The options of a key's job: retries are ours, per slice. One job per key is ours too: the Lua
 * that sends the add adds it only where the key's job pointer names no job of the key's.
 */
function jobOptions(delayMs: number, level: Level): JobsOptions {
  return {
    delay: delayMs,
    ...(level !== WAIT_LIST && { priority: level }),
    // A run never fails for a slice.
    attempts: 1,
    removeOnComplete: true,
    removeOnFail: { count: 1000 },
  };
}

/** BullMQ's add of the key's job, built by BullMQ but not sent (src/bullmq `captureAdd`), as our scripts take it. */
function capturedAdd(queue: KeyQueue, key: Key, delayMs: number, level: Level) {
  const add = captureAdd(queue, JOB_NAME, { key }, jobOptions(delayMs, level));
  return add && { kind: add.kind, call: add.call, done: add.done };
}

/**
 * BullMQ's queue prefix (`prefix:name:`), when BullMQ names the keys a push reads under it as
 * push.lua derives them (its job lists, keys.ts BULLMQ_JOB_LISTS; a job's hash the prefix and the
 * job id); undefined when the installed BullMQ names them otherwise, and then pushes take the
 * general path (the job added after the push).
 */
export function queuePrefixOf(queue: KeyQueue): string | undefined {
  if (!prefixes.has(queue)) prefixes.set(queue, prefixNaming(queue, BULLMQ_JOB_LISTS));
  return prefixes.get(queue);
}

/** A queue's names never change: checked once per queue, not per push. */
const prefixes = new WeakMap<KeyQueue, string | undefined>();

/** Whether a queue's adds of each kind a push makes have the keys push.lua derives (see pushAdd). */
const addsDerivable = new WeakMap<KeyQueue, Partial<Record<PushAdd['kind'], boolean>>>();

/**
 * BullMQ's add of the key's job for a push to make in its own script call (push.lua), built by
 * BullMQ but not sent: at `level`, its standard add of a job that may start now (`delayMs` 0, the
 * wait list), or its delayed add of one that waits `delayMs` (a key waiting to fill its
 * maxWaitMs). `done` takes that script's reply as BullMQ's and resolves when BullMQ has read it.
 * Undefined when BullMQ did not build one of these at once, or builds its keys otherwise than
 * push.lua derives them (checked at a queue's first add of each kind, not per push): then nothing
 * is sent or pending, and the caller adds the job the usual way.
 */
export function pushAdd(queue: KeyQueue, key: Key, delayMs: number, level: Level): CarriedAdd | undefined {
  let derivable = addsDerivable.get(queue);
  if (!derivable) addsDerivable.set(queue, (derivable = {}));
  // BullMQ adds a job with a delay by its delayed add (Job.addJob): known not to fit, it is not built.
  if (derivable[delayMs > 0 ? 'delayed' : 'standard'] === false) return undefined;
  const add = capturedAdd(queue, key, delayMs, level);
  if (!add) return undefined;
  const kind = add.kind === 'prioritized' ? undefined : add.kind;
  if (kind && derivable[kind] === undefined) {
    const prefix = queuePrefixOf(queue);
    derivable[kind] = prefix !== undefined && addKeysDerivable({ kind, call: add.call }, prefix);
  }
  if (!kind || !derivable[kind]) {
    void add.done(null).catch(() => undefined);
    return undefined;
  }
  return { kind, call: add.call, done: add.done };
}

/** The most keys remembered: past it, the key remembered longest ago is forgotten. */
const MAX_KEYS = 10_000;

/**
 * Keys this process's pushes found waiting to fill with their job due by then, and until when (by
 * this process's clock). A push to one sends no BullMQ add: its call finds the key covered, and
 * building the add would cost the pusher 13–20 µs (BullMQ's Job.addJob, measured per push) on
 * every push of a wait, for the one that adds the job. Only a hint: a key whose job ran early (a
 * push filled it) costs the push that finds it so a second call, its job added after it
 * (`KeyJobs.afterPush`), as every push to a waiting key cost before.
 */
class FillingKeys {
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
