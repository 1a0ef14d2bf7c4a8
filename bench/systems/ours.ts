import { batchByKey, type Batcher } from '../../src';
import type { ConsumerOptions, OursVariant, System, Target } from './types';

/**
 * The library as a user runs it: default list store, lock renewal, fencing and the recovery sweep
 * all on (defaults), connected by URL as the README shows. Only the variant's options differ.
 */
export function oursSystem(variant: OursVariant = {}): System {
  const suffix = [
    variant.store && variant.store !== 'list' ? `store ${variant.store}` : '',
    variant.scheduling && variant.scheduling !== 'fair' ? variant.scheduling : '',
    variant.maxRuntimeMs !== undefined ? `maxRuntimeMs ${variant.maxRuntimeMs}` : '',
  ].filter(Boolean);
  const batcher = (target: Target, handler: ConsumerOptions['handler'] = () => undefined): Batcher =>
    batchByKey({
      name: target.namespace,
      connection: target.url,
      ...variant,
      eachIteration: (ids, ctx) => handler(ctx.key, ids),
    });
  return {
    id: 'ours',
    label: suffix.length ? `ours (${suffix.join(', ')})` : 'ours',
    pushes: 'performBatchLater(1,000 ids)',
    async producer(target) {
      const b = batcher(target);
      return {
        push: async (key, ids) => {
          await b.performBatchLater(ids, { key });
        },
        close: () => b.close(),
      };
    },
    async consumer(target, options) {
      const b = batcher(target, options.handler);
      const worker = b.createWorker({ concurrency: options.concurrency, autorun: false });
      await worker.waitUntilReady();
      return {
        start: () => void worker.run(),
        close: () => b.close(),
      };
    },
  };
}
