import { describe, InvalidOptionError, KeyBacklogFullError } from '../core/errors';
import { perKey, requiredInteger } from '../core/validate';
import type { BacklogFull } from '../storage/protocol';
import type { Key, MaxPendingPerKey } from '../core/types';

/**
 * Backpressure (`maxPendingPerKey`): the limit a push is judged by, in the pusher. The judging
 * itself is in Redis, in the push's own script call (includes/backlog.lua), so concurrent pushes
 * from any number of processes never take a key past it.
 */

/** Validates the option up front (a function's results are checked per push, see `maxPendingOf`). */
export function validateMaxPendingOption(option: unknown): MaxPendingPerKey | undefined {
  if (option === undefined || typeof option === 'function') return option as MaxPendingPerKey | undefined;
  if (typeof option !== 'number') {
    throw new InvalidOptionError(
      `options.maxPendingPerKey must be an integer >= 1 or a function (key) => number | undefined, got ${describe(option)}`,
    );
  }
  return requiredInteger('options.maxPendingPerKey', option, 1);
}

/** The limit of `key`, undefined for none; a function's bad result throws (the push writes nothing). */
export function maxPendingOf(option: MaxPendingPerKey | undefined, key: Key): number | undefined {
  return perKey('options.maxPendingPerKey', option, key, (where, limit) =>
    limit === undefined ? undefined : requiredInteger(where, limit, 1),
  );
}

/** The error of a push refused for its key's backlog. */
export function backlogFullError(key: Key, full: BacklogFull): KeyBacklogFullError {
  return new KeyBacklogFullError(
    `performBatchLater for key ${JSON.stringify(key)} was refused: the key has ${full.pending} ids pending and the push would add ` +
      `${full.adding}, past its maxPendingPerKey (${full.limit}); nothing was written. Push again once its workers have drained it`,
    key,
    full.limit,
    full.pending,
  );
}
