import { describe, InvalidOptionError } from './errors';
import { MAX_TIMER_MS } from './limits';
import { perKey, requiredInteger } from './validate';
import type { Key } from './types';

/**
 * Wait to fill (`minSliceSize`, `maxWaitMs`): a key's run starts once it has `minSliceSize` ids
 * ready, or once its oldest ready id has waited `maxWaitMs`, whichever comes first (Kafka's
 * `linger.ms`). Pushes and claims judge it in Redis (includes/fill.lua); this module checks the
 * options up front and resolves them per key, for both sides.
 */

/** One key's wait to fill, resolved; absent when the key starts at once. */
export interface Fill {
  minSliceSize: number;
  maxWaitMs: number;
}

/** The two options as given, each a number or a function of the key (checked, see `validateFillOptions`). */
export interface FillOption {
  minSliceSize: number | ((key: Key) => number);
  maxWaitMs: number | ((key: Key) => number);
}

/** At most sliceSize: a run claims no more. */
const checkMinSliceSize = (sliceSize: number) => (where: string, value: unknown) => requiredInteger(where, value, 1, sliceSize);

const checkMaxWaitMs = (where: string, value: unknown) => requiredInteger(where, value, 0, MAX_TIMER_MS);

function numberOrFunction(where: string, value: unknown, check: (v: unknown) => number): number | ((key: Key) => number) {
  return typeof value === 'function' ? (value as (key: Key) => number) : check(value);
}

/**
 * Checks the options up front (a function's results are checked per key, see `fillOf`);
 * undefined when neither is given. `maxWaitMs` is required with `minSliceSize` (a key that waits
 * for ids that never come would wait for ever); `minSliceSize` defaults to `sliceSize` when only
 * `maxWaitMs` is given (wait up to that long for a full slice).
 */
export function validateFillOptions(minSliceSize: unknown, maxWaitMs: unknown, sliceSize: number): FillOption | undefined {
  if (minSliceSize === undefined && maxWaitMs === undefined) return undefined;
  if (maxWaitMs === undefined) {
    throw new InvalidOptionError(
      `options.maxWaitMs is required with options.minSliceSize (${describe(minSliceSize)}): how long a key's oldest id may wait ` +
        'for the slice to fill before its run starts anyway',
    );
  }
  return {
    minSliceSize:
      minSliceSize === undefined
        ? sliceSize
        : numberOrFunction('options.minSliceSize', minSliceSize, (v) => checkMinSliceSize(sliceSize)('options.minSliceSize', v)),
    maxWaitMs: numberOrFunction('options.maxWaitMs', maxWaitMs, (v) => checkMaxWaitMs('options.maxWaitMs', v)),
  };
}

/**
 * The wait to fill of `key`, or undefined when it starts at once (no option, a `minSliceSize`
 * of 1 or a `maxWaitMs` of 0). A function's bad result throws an InvalidOptionError: a push
 * rejects before it writes anything, a run is retried (logged), as with a bad `rateLimit(key)`.
 */
export function fillOf(option: FillOption | undefined, key: Key, sliceSize: number): Fill | undefined {
  if (!option) return undefined;
  const minSliceSize = perKey('options.minSliceSize', option.minSliceSize, key, checkMinSliceSize(sliceSize));
  const maxWaitMs = perKey('options.maxWaitMs', option.maxWaitMs, key, checkMaxWaitMs);
  return minSliceSize > 1 && maxWaitMs > 0 ? { minSliceSize, maxWaitMs } : undefined;
}

/** The wait to fill every key has (undefined: none), or 'per-key' when either option is a function of the key. */
export function sharedFill(option: FillOption | undefined, sliceSize: number): Fill | undefined | 'per-key' {
  if (option !== undefined && (typeof option.minSliceSize === 'function' || typeof option.maxWaitMs === 'function')) return 'per-key';
  // No function to call: the key is never looked at.
  return fillOf(option, '', sliceSize);
}
