import { Queue, Worker } from 'bullmq';
import { chunk, redisOptions, reportErrors } from './shared';
import type { System, SystemId } from './types';

interface JobData {
  key: string;
  ids: string[];
}

/** Completed jobs are dropped, as ours does, so neither side pays for a growing completed set. */
const JOB_OPTIONS = { removeOnComplete: true, removeOnFail: 1000 };

/**
 * Plain BullMQ with `idsPerJob` ids per job and no per-key exclusivity: 1 is what users have today,
 * 100 is the sidekiq-grouping approach, Infinity is one job per push (per key) carrying all its ids.
 * One FIFO wait list for every key.
 *
 * A push of one id, and every push of bullmq-per-key, is one job: it goes in with Queue.add, as a
 * user adding one job writes it (addBulk would wrap it in MULTI/EXEC). Pushes of more ids to the
 * other systems (every push of the older scenarios, 10 ids or more) use Queue.addBulk as before.
 */
export function bullmqSystem(id: Extract<SystemId, 'bullmq-per-id' | 'bullmq-chunks' | 'bullmq-per-key'>, idsPerJob: number): System {
  const perPush = !Number.isFinite(idsPerJob);
  return {
    id,
    label: id,
    pushes: perPush ? 'Queue.add of 1 job (all its ids)' : `Queue.addBulk of ${(1000 / idsPerJob).toLocaleString('en-US')} jobs`,
    async producer(target) {
      const queue = new Queue<JobData, void, string>(target.namespace, { connection: redisOptions(target.url) });
      await queue.waitUntilReady();
      return {
        push: async (key, ids) => {
          if (perPush || ids.length === 1) await queue.add('work', { key, ids: [...ids] }, JOB_OPTIONS);
          else await queue.addBulk(chunk(ids, idsPerJob).map((part) => ({ name: 'work', data: { key, ids: part }, opts: JOB_OPTIONS })));
        },
        close: () => queue.close(),
      };
    },
    async consumer(target, options) {
      const worker = new Worker<JobData, void, string>(target.namespace, async (job) => options.handler(job.data.key, job.data.ids), {
        connection: redisOptions(target.url),
        concurrency: options.concurrency,
        autorun: false,
      });
      worker.on('error', reportErrors(id));
      await worker.waitUntilReady();
      return {
        start: () => void worker.run(),
        close: () => worker.close(),
      };
    },
  };
}
