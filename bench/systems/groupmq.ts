import { Queue, Worker } from 'groupmq';
import { Redis } from 'ioredis';
import { redisOptions, reportErrors } from './shared';
import type { System } from './types';

interface JobData {
  id: string;
}

/** groupmq as its README shows it: one job per id, `groupId` = key, so one job per key runs at a time. */
export function groupmqSystem(): System {
  const queueFor = (url: string, namespace: string) => new Queue<JobData>({ redis: new Redis(redisOptions(url)), namespace });
  return {
    id: 'groupmq',
    label: 'groupmq',
    pushes: '1,000 concurrent Queue.add',
    producer(target) {
      const queue = queueFor(target.url, target.namespace);
      return Promise.resolve({
        // groupmq has no bulk add; concurrent adds share one connection, so ioredis pipelines them.
        push: async (key, ids) => {
          await Promise.all(ids.map((id) => queue.add({ groupId: key, data: { id } })));
        },
        close: () => queue.close(),
      });
    },
    async consumer(target, options) {
      const queue = queueFor(target.url, target.namespace);
      await queue.redis.ping();
      let worker: Worker<JobData> | undefined;
      return {
        // groupmq's Worker starts its loop in the constructor, so it is built only when timing starts.
        start: () => {
          worker = new Worker<JobData>({
            queue,
            concurrency: options.concurrency,
            handler: async (job) => options.handler(job.groupId, [job.data.id]),
          });
          worker.on('error', reportErrors('groupmq'));
        },
        close: async () => {
          await worker?.close(5_000);
          await queue.close();
        },
      };
    },
  };
}
