import { batchByKey, type Batcher, type BatchByKeyOptions, type EachIteration } from '../../src';
import type { ConsumerOptions, OursVariant, System, Target } from './types';

const n = (value: number) => value.toLocaleString('en-US');

/** The variant's rate limit as the option takes it: for its prefix's keys only, if it has one. */
function rateLimitOption(limit: NonNullable<OursVariant['rateLimit']>): NonNullable<BatchByKeyOptions['rateLimit']> {
  const { keyPrefix, ...rate } = limit;
  return keyPrefix === undefined ? rate : (key) => (key.startsWith(keyPrefix) ? rate : undefined);
}

/** The handler, with the variant's retryAfter calls in front of it (see OursVariant.retryAfter). */
function eachIteration(handler: ConsumerOptions['handler'], retry: OursVariant['retryAfter']): EachIteration {
  if (!retry) return (ids, ctx) => handler(ctx.key, ids);
  const slices = new Map<string, number>();
  return (ids, ctx) => {
    if (ctx.key.startsWith(retry.keyPrefix)) {
      const slice = (slices.get(ctx.key) ?? 0) + 1;
      slices.set(ctx.key, slice);
      if (slice % retry.every === 0) ctx.retryAfter(retry.ms);
    }
    return handler(ctx.key, ids);
  };
}

/**
 * The library as a user runs it: default list store, lock renewal, fencing and the recovery sweep
 * all on (defaults), connected by URL as the README shows. Only the variant's options differ.
 */
export function oursSystem(variant: OursVariant = {}): System {
  const { rateLimit, retryAfter, ...options } = variant;
  const suffix = [
    variant.store && variant.store !== 'list' ? `store ${variant.store}` : '',
    variant.scheduling && variant.scheduling !== 'fair' ? variant.scheduling : '',
    variant.maxRuntimeMs !== undefined ? `maxRuntimeMs ${variant.maxRuntimeMs}` : '',
    rateLimit
      ? `rateLimit ${n(rateLimit.max)}/${n(rateLimit.durationMs)} ` +
        `ms${rateLimit.keyPrefix !== undefined ? ` on ${rateLimit.keyPrefix}*` : ''}`
      : '',
    retryAfter ? `retryAfter ${n(retryAfter.ms)} ms every ${retryAfter.every}th slice of ${retryAfter.keyPrefix}*` : '',
    variant.maxWaitMs !== undefined ? `maxWaitMs ${n(variant.maxWaitMs)}` : '',
    variant.minSliceSize !== undefined ? `minSliceSize ${n(variant.minSliceSize)}` : '',
    variant.pushesPerCall !== undefined ? `pushesPerCall ${n(variant.pushesPerCall)}` : '',
    variant.globalRateLimit ? `globalRateLimit ${n(variant.globalRateLimit.max)}/${n(variant.globalRateLimit.durationMs)} ms` : '',
    variant.globalConcurrency !== undefined ? `globalConcurrency ${n(variant.globalConcurrency)}` : '',
  ].filter(Boolean);
  const batcher = (target: Target, handler: ConsumerOptions['handler'] = () => undefined): Batcher =>
    batchByKey({
      name: target.namespace,
      connection: target.url,
      ...options,
      ...(rateLimit && { rateLimit: rateLimitOption(rateLimit) }),
      eachIteration: eachIteration(handler, retryAfter),
    });
  return {
    id: 'ours',
    label: suffix.length ? `ours (${suffix.join(', ')})` : 'ours',
    pushes: 'performBatchLater(1,000 ids)',
    producer(target) {
      const b = batcher(target);
      return Promise.resolve({
        push: async (key, ids) => {
          await b.performBatchLater(ids, { key });
        },
        close: () => b.close(),
      });
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
