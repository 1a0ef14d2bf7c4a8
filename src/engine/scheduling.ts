import type { InterruptCheck } from './interrupt';
import { log } from '../core/logger';
import { queueLoad, type QueueLists } from '../storage/batcher-protocol';
import type { RedisClient } from '../storage/scripts';
import { JOB_NAME, LEVEL, type KeyQueue } from '../storage/job';
import type { Key, KeyJob, Logger } from '../core/types';

/**
 * Fair scheduling is a feedback queue on BullMQ's own structures, three levels (see `LEVEL` in
 * job.ts). A key's new job whose first push fits in one slice (the common case: a controller
 * pushing a few ids) goes to BullMQ's wait list, FIFO, which workers always take first; a new job
 * with a bigger first push goes to the prioritized set at priority 1, so a flood split over many
 * new keys queues behind every light newcomer, however many keys it has; a run that used its turn
 * (its budget spent, or preempted past its quantum) goes back at priority 2, FIFO among
 * themselves. Between slices, a run above level 0, or a level-0 run past its quantum, yields when
 * level-0 jobs wait, so a key that has not had a turn starts within a few slices instead of after
 * whole budgets. The aging sweep (see `age`) lifts prioritized jobs that waited too long to level
 * 0, so a steady stream of light keys cannot starve the others.
 */

/**
 * How long a level-0 run goes before it can be preempted (and so demoted): a light key's run is
 * far shorter, so light keys stay at level 0 however often they are pushed to.
 */
const LEVEL_ZERO_QUANTUM_MS = 50;

/** The wait and active lists are read at most this often per run: fast slices would read them thousands of times a second. */
const READ_INTERVAL_MS = 5;

/** Due delayed jobs the preemption read looks at, at most. */
const DUE_LOOKED_AT = 20;

/**
 * Yields to waiting level-0 jobs (the wait list, and due delayed jobs at priority 0: see
 * queue-load.lua), without a thundering herd: with `w` jobs waiting and `a`
 * running, each run yields with probability w / a at a slice boundary, so about `w` yield.
 * Only jobs seen waiting by two reads in a row count: a job an idle worker slot takes at once
 * needs no one to yield. A run never yields after a short slice (its key just emptied: its
 * next claim will most likely end the run anyway), nor at level 0 before its quantum. The
 * counts are read in the background and are at most one slice old, so the check itself costs
 * the slice loop nothing; a level-0 run starts reading only half-way to its quantum, so the short
 * runs of light keys read nothing at all.
 */
export function preemption(
  client: RedisClient,
  /** The wait lists to read, asked at each read: the counts a worker serves may change during a run. */
  lists: () => readonly QueueLists[],
  logger: Logger,
  run: { level: number; startedAt: number },
  random: () => number = Math.random,
): InterruptCheck {
  let waiting = 0;
  let waitingBefore = 0;
  let running = 1;
  let reading = false;
  let lastRead = 0;
  const read = () => {
    if (reading || performance.now() - lastRead < READ_INTERVAL_MS) return;
    reading = true;
    lastRead = performance.now();
    // One script per shard queue, whose BullMQ keys share one slot (its prefix's hash tag).
    queueLoad(client, lists(), DUE_LOOKED_AT)
      .then((load) => {
        waitingBefore = waiting;
        waiting = load.waiting;
        running = Math.max(1, load.active);
      })
      .catch((err: unknown) => log(logger, 'debug', 'batch-by-key: could not read the wait list; not preempting', { err }))
      .finally(() => (reading = false));
  };
  const ranMs = () => Date.now() - run.startedAt;
  if (run.level > 0) read();
  return (slice) => {
    const stillWaiting = Math.min(waiting, waitingBefore);
    const mayYield = slice.full && (run.level > 0 || ranMs() >= LEVEL_ZERO_QUANTUM_MS);
    const yieldNow = mayYield && stillWaiting > 0 && random() < stillWaiting / running;
    if (run.level > 0 || ranMs() >= LEVEL_ZERO_QUANTUM_MS / 2) read();
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

/**
 * Puts a run's job at the level of keys that had their turn before it is requeued (BullMQ keeps
 * the priority through the delayed hop). Unconditional: the aging sweep may have reset it in
 * Redis since the job was read.
 */
export async function demote(job: KeyJob): Promise<void> {
  await job.changePriority({ priority: LEVEL.hadTurn });
}

/** Prioritized jobs looked at per aging sweep: BullMQ lists them by priority, FIFO within one. */
const AGING_LIMIT = 100;

/**
 * Aging: lifts our prioritized jobs that have waited at least `maxRuntimeMs` to level 0, at the
 * back of the wait list: a job that ran since its last run could have ended (it started at
 * `processedOn` and lasted at most the key's budget), a heavy newcomer since it was added. Other
 * job names on the queue are left alone. Run by every worker's recovery timer. Returns how many
 * were lifted.
 */
export async function age(queue: KeyQueue, maxRuntimeMs: number, budget: (key: Key) => number): Promise<number> {
  const now = Date.now();
  let lifted = 0;
  for (const job of await queue.getPrioritized(0, AGING_LIMIT - 1)) {
    if (job.name !== JOB_NAME) continue;
    const waitingSince = job.processedOn === undefined ? job.timestamp : job.processedOn + budget(job.data.key);
    if (waitingSince + maxRuntimeMs < now) {
      await job.changePriority({ priority: LEVEL.light });
      lifted++;
    }
  }
  return lifted;
}
