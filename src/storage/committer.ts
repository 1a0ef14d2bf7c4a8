import calculateSlot from 'cluster-key-slot';
import { Cluster } from 'ioredis';
import { connectionCloses } from '../core/connection';
import { isReplyError } from '../core/redis-errors';
import { isBulk, push, pushMany, type PushOfMany, type PushResult } from './protocol';
import type { RedisClient } from './scripts';

/**
 * What came of one push of a shared call: `reply`, Redis's answer for it (its result, which may be
 * a refusal, or the error reply Redis gave it or the whole call: it then wrote nothing), definite
 * unless a connection of the client closed during the call (ioredis may then have sent it again,
 * and this answer is the second one's); or `unknown`, what ended a call that may have run without
 * an answer (its connection closed, ioredis gave up retrying it on a Cluster); or `notSent`, a
 * call that never went out, its connection ended before it (`close()` overtook the push).
 */
export type Committed = { reply: PushResult | Error; definite: boolean } | { unknown: unknown } | { notSent: 'closed' };

/** Group commit: how many pushes may share a call, and how long an idle lane lingers for more. */
export interface CommitOptions {
  /** `pushesPerCall`: the most pushes one script call carries. */
  maxPushes: number;
  /** `pushLingerMs`: how long the first push to an idle lane waits for others (0: none). */
  lingerMs: number;
}

/**
 * The lanes of a standalone connection, beside a Cluster's slots (0 and up). A call's pushes send
 * as many keys each (see push-many.lua): a push whose call writes its recovery index and may add
 * its key's job sends two, and a push that adds no job in its call (a BullMQ that names its keys
 * otherwise) sends one, and goes in a lane of its own.
 */
const WITH_JOB_KEYS = -1;
const KEY_ONLY = -2;

interface Waiting {
  push: PushOfMany;
  /** A bulk push (see protocol.ts `isBulk`), which goes in a call of its own. */
  bulk: boolean;
  settle: (committed: Committed) => void;
}

/** One connection's (on a Cluster, one slot's) calls in flight and the pushes waiting behind them. */
interface Lane {
  inFlight: number;
  waiting: Waiting[];
  /** How many of `waiting` are bulk pushes: none, the usual case, spares looking for them. */
  bulks: number;
  linger: NodeJS.Timeout | undefined;
}

/**
 * Group commit of pushes, as a database commits its log: while a push call is in flight on a
 * lane (the connection; on a Cluster, the slot of the key, as a call's keys must share one),
 * pushes that arrive wait and go out together, at most `maxPushes` in one call (push-many.lua),
 * when it returns, or as soon as `maxPushes` wait. An idle lane sends at once, or after
 * `lingerMs` if set: so it adds no delay when idle, and takes more per call as load rises. Each
 * push gets its own outcome (see Committed); a lone push goes out as push.lua, a bulk push alone
 * (see protocol.ts `bulkPush`). A lane's calls go out in the order their pushes came, so a key's
 * pushes are stored in the order they were made.
 */
export class Committer {
  private readonly lanes = new Map<number, Lane>();

  /** Set by flush: a push still on its way to a call lingers no more. */
  private closing = false;

  constructor(
    private readonly client: RedisClient,
    private readonly options: CommitOptions,
  ) {}

  /** Sends `p` in the lane's next call. Never rejects: the outcome says what happened. */
  commit(p: PushOfMany): Promise<Committed> {
    const id = this.client instanceof Cluster ? calculateSlot(p.names.base) : p.call.job ? WITH_JOB_KEYS : KEY_ONLY;
    let lane = this.lanes.get(id);
    if (!lane) this.lanes.set(id, (lane = { inFlight: 0, waiting: [], bulks: 0, linger: undefined }));
    const bulk = isBulk(p.call);
    if (bulk) lane.bulks++;
    const done = new Promise<Committed>((settle) => lane.waiting.push({ push: p, bulk, settle }));
    // A full call goes at once, even behind one in flight: waiting longer would gather no more
    // into it, and a lane whose calls return late (a busy event loop) would cap the push rate.
    if (lane.waiting.length >= this.options.maxPushes) this.send(id, lane);
    else if (lane.inFlight > 0) return done;
    // A bulk push (see send) gathers nothing by lingering: it goes at once, behind those lingering.
    else if (bulk) this.send(id, lane);
    else if (this.options.lingerMs === 0 || this.closing) this.send(id, lane);
    else lane.linger ??= setTimeout(() => this.send(id, lane), this.options.lingerMs);
    return done;
  }

  /**
   * Sends the pushes that linger now, and those still on their way without linger (the batcher
   * is closing: its connection goes next).
   */
  flush(): void {
    this.closing = true;
    for (const [id, lane] of this.lanes) if (lane.linger) this.send(id, lane);
  }

  private send(id: number, lane: Lane): void {
    clearTimeout(lane.linger);
    lane.linger = undefined;
    // A bulk push's ids go by native commands, not as a script's arguments: it cannot share a
    // call, and goes alone. It waits in the lane all the same, so that it never overtakes the
    // pushes made before it (push order per key).
    const bulk = lane.bulks === 0 ? -1 : lane.waiting.findIndex((w) => w.bulk);
    const batch = lane.waiting.splice(0, bulk === 0 ? 1 : bulk > 0 ? Math.min(bulk, this.options.maxPushes) : this.options.maxPushes);
    if (bulk === 0) lane.bulks--;
    if (batch.length === 0) {
      if (lane.inFlight === 0) this.lanes.delete(id);
      return;
    }
    lane.inFlight++;
    void this.call(batch.map((w) => w.push)).then((outcomes) => {
      batch.forEach((w, i) => w.settle(outcomes[i]!));
      lane.inFlight--;
      // Those that waited behind this call have waited enough: no linger for them.
      this.send(id, lane);
    });
  }

  private async call(pushes: PushOfMany[]): Promise<Committed[]> {
    const { client } = this;
    const closes = connectionCloses(client);
    const all = (outcome: Committed) => pushes.map(() => outcome);
    // A closed client sends nothing more: the pushes wrote nothing, which an ioredis error after
    // the call could not prove.
    if (closedForGood(client)) return all({ notSent: 'closed' });
    try {
      const replies = pushes.length === 1 ? [await push(client, pushes[0]!.names, pushes[0]!.call)] : await pushMany(client, pushes);
      const definite = connectionCloses(client) === closes;
      return replies.map((reply) => ({ reply, definite }));
    } catch (err) {
      return all(isReplyError(err) ? { reply: err as Error, definite: connectionCloses(client) === closes } : { unknown: err });
    }
  }
}

/**
 * Whether the client will run no more commands: ended, or closing for good. ioredis marks the
 * latter (its own `manuallyClosing`, not in its types) once it wrote QUIT or was told to
 * disconnect: Redis runs nothing a connection sends after QUIT, and ioredis fails whatever it
 * still queued, so a call made then is never run, though ioredis may write it and fail it only
 * when the socket closes.
 */
function closedForGood(client: RedisClient): boolean {
  return client.status === 'end' || (client as unknown as { manuallyClosing?: unknown }).manuallyClosing === true;
}
