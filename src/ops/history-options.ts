import { describe, InvalidOptionError } from '../core/errors';
import { duration, integer } from '../core/validate';
import type { HistoryOptions } from '../core/types';

/** The `history` option (see history.ts), apart so that options.ts needs nothing of the sampler. */

/** Sampling faster than this only loads Redis (and tests need no faster). */
const MIN_INTERVAL_MS = 100;
/** Samples kept at most: bounds the series' memory and what `history()` returns. */
export const MAX_HISTORY_SAMPLES = 10_000;
/** `topKeys` at most: a sample holds twice as many keys at most (by ids waiting, by lag). */
const MAX_TOP_KEYS = 10;

export const HISTORY_DEFAULTS = { intervalMs: 10_000, retentionMs: 3_600_000, topKeys: 5 } as const;

export type ResolvedHistory = Required<HistoryOptions>;

/** Samples a series of these options keeps. */
export const samplesKept = (h: ResolvedHistory): number => Math.floor(h.retentionMs / h.intervalMs);

/** The `history` option: `false` (off), `true` or undefined (the defaults), or `{ intervalMs?, retentionMs?, topKeys? }`. */
export function validateHistoryOption(option: unknown): ResolvedHistory | false {
  if (option === false) return false;
  if (option === undefined || option === true) return { ...HISTORY_DEFAULTS };
  if (typeof option !== 'object' || option === null || Array.isArray(option)) {
    throw new InvalidOptionError(`options.history must be false or { intervalMs?, retentionMs?, topKeys? }, got ${describe(option)}`);
  }
  const unknown = Object.keys(option).filter((field) => !Object.hasOwn(HISTORY_DEFAULTS, field));
  if (unknown.length > 0)
    throw new InvalidOptionError(`options.history takes intervalMs, retentionMs and topKeys, got ${unknown.join(', ')}`);
  const given = option as HistoryOptions;
  const intervalMs = duration('options.history.intervalMs', given.intervalMs, HISTORY_DEFAULTS.intervalMs, MIN_INTERVAL_MS);
  const most = intervalMs * MAX_HISTORY_SAMPLES;
  // An hour is fewer than one long interval, or more than the cap of short ones: the default moves
  // into the range instead of throwing.
  const { retentionMs = Math.max(intervalMs, Math.min(HISTORY_DEFAULTS.retentionMs, most)) } = option as HistoryOptions;
  if (typeof retentionMs !== 'number' || !Number.isInteger(retentionMs) || retentionMs < intervalMs || retentionMs > most) {
    throw new InvalidOptionError(
      `options.history.retentionMs must be an integer between intervalMs and ${MAX_HISTORY_SAMPLES} × intervalMs (${intervalMs} to ` +
        `${most}), got ${describe(retentionMs)}`,
    );
  }
  const topKeys = integer('options.history.topKeys', given.topKeys, HISTORY_DEFAULTS.topKeys, 0, MAX_TOP_KEYS);
  return { intervalMs, retentionMs, topKeys };
}
