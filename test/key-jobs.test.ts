import { describe, expect, it } from 'vitest';
import { jobPointerOf } from '../src/storage/keys';
import { KeyJobs, queuePrefixOf } from '../src/storage/key-job';
import { WAIT_LIST, type KeyQueue } from '../src/storage/job';
import { defineScripts } from '../src/storage/scripts';
import { queueOf, redisClient, testBatcher } from './helpers/redis';

/**
 * A BullMQ whose add this library cannot build inside its own scripts gets its key jobs through
 * BullMQ's public `Queue.add`, then a repoint (KeyJobs.addThroughQueue): the key's pointer names
 * the added job unless the key has a job, which is treated as `ensure` treats it.
 */
describe('KeyJobs.addThroughQueue', () => {
  const setup = () => {
    const b = testBatcher({ eachIteration: () => undefined });
    const queue = queueOf(b) as unknown as KeyQueue;
    const client = redisClient();
    defineScripts(client);
    const pointer = (key: string) => client.get(jobPointerOf(queuePrefixOf(queue)!, key));
    return { queue, pointer, jobs: new KeyJobs(client, () => queue) };
  };

  it('adds the key job with Queue.add and points the key at it', async () => {
    const { queue, pointer, jobs } = setup();
    const id = await jobs.addThroughQueue(queue, 'k', 0, WAIT_LIST);
    expect(await pointer('k')).toBe(id);
    const job = await queue.getJob(id);
    expect(job?.data).toEqual({ key: 'k' });
    expect(await job?.getState()).toBe('waiting');
  });

  it("keeps the key's waiting job as the key's job: the pointer does not move", async () => {
    const { queue, pointer, jobs } = setup();
    const first = await jobs.ensure('k', 0, WAIT_LIST, queue);
    expect(await jobs.addThroughQueue(queue, 'k', 0, WAIT_LIST)).toBe(first);
    expect(await pointer('k')).toBe(first);
  });

  it("moves the key's delayed job to the add's time, as ensure does", async () => {
    const { queue, pointer, jobs } = setup();
    const delayed = await jobs.ensure('k', 60_000, WAIT_LIST, queue);
    expect(await jobs.addThroughQueue(queue, 'k', 0, WAIT_LIST)).toBe(delayed);
    expect(await pointer('k')).toBe(delayed);
    expect((await queue.getJob(delayed))?.delay).toBe(0);
  });
});
