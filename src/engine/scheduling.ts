import type { InterruptCheck } from './interrupt';
import { log } from '../core/logger';
import { queueLoad, type QueueLists } from '../storage/batcher-protocol';
import type { RedisClient } from '../storage/scripts';
import { JOB_NAME, WAIT_LIST, type KeyQueue, type Level } from '../storage/job';
import type { Key, KeyJob, Logger } from '../core/types';

/**
 * Fair scheduling is a feedback queue on BullMQ's own structures, three levels (see `LEVELS` in
 * job.ts). A key's new job whose first push fits in one slice (the common case: a controller
 * pushing a few ids) waits at the light level, FIFO, which workers take first; a new job with a
 * bigger first push waits at the heavy level, so a flood split over many new keys queues behind
 * every light newcomer, however many keys it has; a run that used its turn (its budget spent, or
 * preempted past its quantum) goes back at the level below, FIFO among themselves. Without
 * `priority(key)` the light level is BullMQ's wait list, which workers always take before the
 * prioritized set; with it, the wait list is a lane of its own before the light level, where
 * high keys wait at every turn. Between slices, a run above the light level, or a run at it past
 * its quantum, yields when jobs wait at the light level or in the wait list (a high key's run:
 * in the wait list), so a key that has not had a turn starts within a few slices instead of
 * after whole budgets. The aging sweep (see `age`) lifts prioritized jobs that waited too long
 * to the wait list, so neither a steady stream of light keys nor high keys can starve the others.
 */

/**
 * How long a run at the light level (or the wait list) goes before it can be preempted (and so
 * demoted): a light key's run is far shorter, so light keys stay light however often they are
 * pushed to.
 */
const LEVEL_ZERO_QUANTUM_MS = 50;

/** The wait and active lists are read at most this often per run: fast slices would read them thousands of times a second. */
const READ_INTERVAL_MS = 5;

/** Due delayed jobs the preemption read looks at, at most. */
const DUE_LOOKED_AT = 20;

/**
 * Yields to jobs waiting at the light level or in the wait list (both BullMQ's and due delayed
 * ones: see queue-load.lua), without a thundering herd: with `w` jobs waiting and `a` running,
 * each run yields with probability w / a at a slice boundary, so about `w` yield. A run in the
 * wait list (a high key's, or one aging lifted) counts only the wait list's: it starts before the
 * light level's. Only jobs seen waiting by two reads in a row count: a job an idle worker slot
 * takes at once needs no one to yield. A run never yields after a short slice (its key just
 * emptied: its next claim will most likely end the run anyway), nor at the light level or in the
 * wait list before its quantum. The counts are read in the background and are at most one slice
 * old, so the check itself costs the slice loop nothing; a light run starts reading only half-way
 * to its quantum, so the short runs of light keys read nothing at all.
 */
export function preemption(
  client: RedisClient,
  /** The wait lists to read, asked at each read: the counts a worker serves may change during a run. */
  lists: () => readonly QueueLists[],
  logger: Logger,
  /** The run's job's level, its batcher's light level (see job.ts `levelsOf`), and when it started. */
  run: { level: Level; light: Level; startedAt: number },
  random: () => number = Math.random,
): InterruptCheck {
  let waiting = 0;
  let waitingBefore = 0;
  let running = 1;
  let reading = false;
  let lastRead = 0;
  const above = run.level > run.light;
  // The jobs that would start before this run's requeued job (or with it, FIFO).
  const ahead = (load: { waiting: number; waitingLight: number }) => load.waiting + (run.level >= run.light ? load.waitingLight : 0);
  const read = () => {
    if (reading || performance.now() - lastRead < READ_INTERVAL_MS) return;
    reading = true;
    lastRead = performance.now();
    // One script per shard queue, whose BullMQ keys share one slot (its prefix's hash tag).
    queueLoad(client, lists(), DUE_LOOKED_AT, run.light)
      .then((load) => {
        waitingBefore = waiting;
        waiting = ahead(load);
        running = Math.max(1, load.active);
      })
      .catch((err: unknown) => log(logger, 'debug', 'batch-by-key: could not read the wait list; not preempting', { err }))
      .finally(() => (reading = false));
  };
  const ranMs = () => Date.now() - run.startedAt;
  if (above) read();
  return (slice) => {
    const stillWaiting = Math.min(waiting, waitingBefore);
    const mayYield = slice.full && (above || ranMs() >= LEVEL_ZERO_QUANTUM_MS);
    const yieldNow = mayYield && stillWaiting > 0 && random() < stillWaiting / running;
    if (above || ranMs() >= LEVEL_ZERO_QUANTUM_MS / 2) read();
    return yieldNow ? 'preempted' : undefined;
  };
}

/** A run's budget: `maxRuntimeMs` scaled by the key's weight (a bad weight counts as 1, with a warning). */
export function budgetOf(key: Key, maxRuntimeMs: number, weight: ((key: Key) => number) | undefined, logger: Logger): number {
  if (!weight) return maxRuntimeMs;
  let w: number;
  try {
    w = weight(key);
  } catch (err) {
    log(logger, 'warn', 'batch-by-key: the weight function threw; using 1', { err, key });
    return maxRuntimeMs;
  }
  if (typeof w === 'number' && Number.isFinite(w) && w > 0) return Math.max(1, Math.round(maxRuntimeMs * w));
  log(logger, 'warn', 'batch-by-key: the weight function returned no positive finite number; using 1', { key, weight: w });
  return maxRuntimeMs;
}

/** Prioritized jobs looked at per level per aging sweep: BullMQ lists them by priority, FIFO within one. */
const AGING_LIMIT = 100;

/**
 * Aging: lifts our prioritized jobs that have waited at least `maxRuntimeMs` to the wait list, at
 * its back: a job that ran since its last run could have ended (it started at `processedOn` and
 * lasted at most the key's budget), a heavy or (with `priority(key)`) light newcomer since it was
 * added. The oldest jobs of each of `levels` are looked at, so a long line at one level hides no
 * other's. Other job names on the queue are left alone. Run by every worker's recovery timer.
 * Returns how many were lifted.
 */
export async function age(queue: KeyQueue, levels: readonly Level[], maxRuntimeMs: number, budget: (key: Key) => number): Promise<number> {
  const now = Date.now();
  let lifted = 0;
  const counts = await queue.getCountsPerPriority([...levels]);
  // All read before any is lifted: a lift moves the later levels' positions.
  const oldest: Promise<KeyJob[]>[] = [];
  let start = 0;
  for (const level of levels) {
    const count = counts[level] ?? 0;
    if (count > 0) oldest.push(queue.getPrioritized(start, start + Math.min(count, AGING_LIMIT) - 1));
    start += count;
  }
  for (const job of (await Promise.all(oldest)).flat()) {
    if (job.name !== JOB_NAME) continue;
    const waitingSince = job.processedOn === undefined ? job.timestamp : job.processedOn + budget(job.data.key);
    if (waitingSince + maxRuntimeMs < now) {
      await job.changePriority({ priority: WAIT_LIST });
      lifted++;
    }
  }
  return lifted;
}
