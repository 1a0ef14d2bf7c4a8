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
 * 100 is the sidekiq-grouping approach. One FIFO wait list for every key.
 */
export function bullmqSystem(id: Extract<SystemId, 'bullmq-per-id' | 'bullmq-chunks'>, idsPerJob: number): System {
  return {
    id,
    label: id,
    pushes: `Queue.addBulk of ${(1000 / idsPerJob).toLocaleString('en-US')} jobs`,
    async producer(target) {
      const queue = new Queue<JobData, void, string>(target.namespace, { connection: redisOptions(target.url) });
      await queue.waitUntilReady();
      return {
        push: async (key, ids) => {
          await queue.addBulk(chunk(ids, idsPerJob).map((part) => ({ name: 'work', data: { key, ids: part }, opts: JOB_OPTIONS })));
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
