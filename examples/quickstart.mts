import { batchByKey } from 'batch-by-key';

const Refresher = batchByKey({
  name: 'quickstart', // its BullMQ queue, and its namespace in Redis
  connection: process.env.REDIS_URL ?? 'redis://localhost:6379',
  eachIteration(ids, ctx) {
    // Up to 100 ids of one key at a time; a key's ids run in push order.
    console.log(`${ctx.key}: refreshing ${ids.join(', ')}`);
  },
});

const worker = Refresher.createWorker({ concurrency: 8 }); // usually in a process of its own
const { ticket } = await Refresher.performBatchLater(['s1', 's2', 's3'], { key: 'acct-42', track: true });
console.log(await Refresher.waitFor(ticket)); // { total: 3, done: 3, failed: 0, pending: 0, ... }
await worker.close();
await Refresher.close();
