import type { Logger } from './types';

export const silentLogger: Logger = {};

/** Logs without ever throwing: a broken logger must not turn a handled failure into a crash. */
export function log(
  logger: Logger,
  level: keyof Logger,
  message: string,
  meta: Record<string, unknown> = {},
): void {
  try {
    logger[level]?.(message, meta);
  } catch {
    // Nothing sensible to do with a logger that throws.
  }
}
