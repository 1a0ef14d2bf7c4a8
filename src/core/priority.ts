import { describe, InvalidOptionError } from './errors';
import { log } from './logger';
import { optionalFunction } from './validate';
import type { Key, Logger, Priority } from './types';

/** Every level, lowest first. */
export const PRIORITIES: readonly Priority[] = ['normal', 'high'];

/** Whether a push's `priority` option asks for 'high' (undefined: 'normal'); anything else is an InvalidOptionError. */
export function isHighPush(priority: unknown): boolean {
  if (priority === undefined) return false;
  if (!PRIORITIES.includes(priority as Priority)) {
    throw new InvalidOptionError(
      `options.priority must be one of ${PRIORITIES.map((p) => `'${p}'`).join(', ')}, got ${describe(priority)}`,
    );
  }
  return priority === 'high';
}

/**
 * Whether the batcher's `priority(key)` makes `key` a high-priority key. A throw or a value that
 * is no level counts as 'normal', with a warning, as `weight` does: a scheduling hint must not
 * stop a push or a run.
 */
export function isHighKey(key: Key, priority: ((key: Key) => Priority) | undefined, logger: Logger): boolean {
  if (!priority) return false;
  let level: unknown;
  try {
    level = priority(key);
  } catch (err) {
    log(logger, 'warn', "batch-by-key: the priority function threw; using 'normal'", { err, key });
    return false;
  }
  if (level === 'high') return true;
  if (level !== 'normal')
    log(logger, 'warn', "batch-by-key: the priority function returned no level; using 'normal'", { key, priority: level });
  return false;
}

/**
 * The batcher's `priority` option: a function, which ranks keys through fair scheduling's levels
 * (see engine/scheduling.ts), so it means nothing with `scheduling: 'fifo'`.
 */
export function validatePriorityOption(option: unknown, scheduling: unknown): ((key: Key) => Priority) | undefined {
  const priority = optionalFunction<(key: Key) => Priority>('options.priority', option, "(key) => 'high' | 'normal'");
  if (priority && scheduling === 'fifo') {
    throw new InvalidOptionError(
      "options.priority ranks keys through fair scheduling's levels: it needs scheduling 'fair' (the default), not 'fifo'",
    );
  }
  return priority;
}
