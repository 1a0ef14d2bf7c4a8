import type { Job, Queue } from '../bullmq';
import { boardReadsOf, type BoardReads } from './board-reads';
import { describe, InvalidOptionError } from '../core/errors';
import { JOB_NAME, WAIT_LIST, type Level, type LevelName } from '../storage/job';
import { formatMs } from './html';
import { log } from '../core/logger';
import type { Batcher, Key, KeyStats } from '../core/types';

/**
 * What `bullBoardAdapters` uses of bull-board's `BullMQAdapter`, by shape: this library never
 * imports bull-board, so an application without it loses nothing, and the class extended is the
 * application's own (the copy its `createBullBoard` comes from).
 */
export interface BullBoardQueueAdapter {
  getName(): string;
  getJob(id: string): Promise<Job<unknown, unknown, string> | undefined | null>;
  getJobs(statuses: string[], start?: number, end?: number): Promise<Job<unknown, unknown, string>[]>;
}

/** bull-board's `BullMQAdapter` class (or a subclass of it): `O` is its options, given to every adapter. */
export type BullBoardAdapterClass<A extends BullBoardQueueAdapter, O> = new (queue: Queue, options?: O) => A;

/** What a key's job shows as its data on a bull-board page: the key's backlog and lag when the page was read. */
export interface KeyJobView {
  key: Key;
  /** Ids waiting to be claimed. */
  pending: number;
  /** `oldestPendingAgeMs` as the dashboard shows it (`'850 ms'`, `'3.2 s'`, `'4.5 min'`); `'0 ms'` with nothing pending. */
  lag: string;
  /**
   * The job's place in fair scheduling, which bull-board shows as its BullMQ priority (0, 1, 2:
   * lower runs first), and which says nothing of the key's importance: `'light'` (a first push
   * that fits in a slice, or lifted by aging), `'heavy'` (a first push bigger than a slice),
   * `'had its turn'` (its run used its budget and requeued it behind the others); with
   * `priority(key)`, `'high'`: a high key's lane, before every normal key (or lifted there by aging).
   */
  level: KeyJobLevel;
  inFlight: number;
  retrying: number;
  /** The age of the key's oldest pending id, by the Redis clock (see `KeyStats`). */
  oldestPendingAgeMs: number;
  /** When these were read, by the Redis clock (ISO 8601). */
  readAt: string;
}

type AnyJob = Job<unknown, unknown, string>;

/** See `KeyJobView.level`. */
export type KeyJobLevel = 'high' | 'light' | 'heavy' | 'had its turn';

const LEVEL_NAMES: Record<LevelName, KeyJobLevel> = { light: 'light', heavy: 'heavy', hadTurn: 'had its turn' };

/**
 * A key job's level, from the BullMQ priority it was added with: one of the batcher's normal
 * levels, or, with `priority(key)`, the wait list (none), a high key's lane (or a job aging lifted).
 */
function levelOf(job: AnyJob, levels: Readonly<Record<LevelName, Level>>): KeyJobLevel {
  const priority = job.opts.priority ?? WAIT_LIST;
  for (const name of Object.keys(LEVEL_NAMES) as LevelName[]) if (levels[name] === priority) return LEVEL_NAMES[name];
  return 'high';
}

/**
 * bull-board adapters for a batcher's queues, one per shard (one without `shards`), each a
 * subclass of the `BullMQAdapter` given: `createBullBoard({ queues: bullBoardAdapters(batcher,
 * BullMQAdapter), serverAdapter })`. When the board reads a page of jobs, every key job on it
 * (named `JOB_NAME`) shows as its data its key, pending count and lag, and in flight and retrying
 * (`KeyJobView`), read then: one batch of reads per page, nothing on a push. Other jobs show as they
 * are. `options` go to every adapter (`{ readOnlyMode: true }`, `description`, …). With shards, each
 * adapter's name is the queue's with `:shard-<index>` (bull-board lists queues by name; its
 * `delimiter: ':'` option groups them under the batcher's).
 */
export function bullBoardAdapters<A extends BullBoardQueueAdapter, O>(
  batcher: Batcher,
  BullMQAdapter: BullBoardAdapterClass<A, O>,
  options?: O,
): A[] {
  const own = boardReadsOf(batcher);
  if (!own)
    throw new InvalidOptionError(
      `bullBoardAdapters needs a batcher made by batchByKey (or a class form's .batcher), got ${describe(batcher)}`,
    );
  if (typeof BullMQAdapter !== 'function')
    throw new InvalidOptionError(
      "bullBoardAdapters needs bull-board's BullMQAdapter class (import { BullMQAdapter } from '@bull-board/api/bullMQAdapter'), " +
        `got ${describe(BullMQAdapter)}`,
    );
  if (options !== undefined && (typeof options !== 'object' || options === null))
    throw new InvalidOptionError(`bullBoardAdapters options must be an object (BullMQAdapter's options), got ${describe(options)}`);
  const queues = own.queues();
  const KeyJobsAdapter = keyJobsAdapter(BullMQAdapter as unknown as BullBoardAdapterClass<BullBoardQueueAdapter, O>, own);
  return queues.map((queue, index) => new KeyJobsAdapter(queue, options, queues.length > 1 ? index : undefined) as unknown as A);
}

/** The subclass of the application's adapter class that shows key jobs as `KeyJobView`s. */
function keyJobsAdapter<O>(Base: BullBoardAdapterClass<BullBoardQueueAdapter, O>, own: BoardReads) {
  return class KeyJobsAdapter extends Base {
    constructor(
      queue: Queue,
      options: O | undefined,
      /** The queue's shard, when the batcher has more than one. */
      private readonly shard: number | undefined,
    ) {
      super(queue, options);
    }

    override getName(): string {
      return this.shard === undefined ? super.getName() : `${super.getName()}:shard-${this.shard}`;
    }

    override async getJobs(statuses: string[], start?: number, end?: number): Promise<AnyJob[]> {
      const jobs = await super.getJobs(statuses, start, end);
      await showKeys(own, jobs);
      return jobs;
    }

    override async getJob(id: string): Promise<AnyJob | undefined | null> {
      const job = await super.getJob(id);
      if (job) await showKeys(own, [job]);
      return job;
    }
  };
}

/** A key job's key; undefined for a job not ours (another name, or data without a key). */
function keyOf(job: AnyJob | null | undefined): Key | undefined {
  if (job?.name !== JOB_NAME) return undefined;
  const key: unknown = (job.data as { key?: unknown } | null)?.key;
  return typeof key === 'string' && key !== '' ? key : undefined;
}

/**
 * Replaces the data of the key jobs among `jobs` (objects read for this page alone) with their
 * keys' views, all keys read in one batch.
 */
async function showKeys(own: BoardReads, jobs: readonly (AnyJob | null | undefined)[]): Promise<void> {
  const keyed = jobs.flatMap((job) => {
    const key = keyOf(job);
    return key === undefined ? [] : [{ job: job!, key }];
  });
  if (keyed.length === 0) return;
  let read: Awaited<ReturnType<BoardReads['readKeys']>>;
  try {
    read = await own.readKeys([...new Set(keyed.map(({ key }) => key))]);
  } catch (err) {
    // The page (and bull-board's actions, which read their job first) still work, with the jobs as stored.
    log(own.logger, 'warn', "batch-by-key: bull-board's read of the keys' backlogs failed; their jobs show as stored", { err });
    return;
  }
  const { at, keys } = read;
  const byKey = new Map(keys.map((k) => [k.key, k]));
  for (const { job, key } of keyed) job.data = { ...(job.data as object), ...view(byKey.get(key)!, levelOf(job, own.levels), at) };
}

function view({ key, pending, inFlight, retrying, oldestPendingAgeMs }: KeyStats, level: KeyJobLevel, at: number): KeyJobView {
  const lag = formatMs(oldestPendingAgeMs);
  return { key, pending, lag, level, inFlight, retrying, oldestPendingAgeMs, readAt: new Date(at).toISOString() };
}
