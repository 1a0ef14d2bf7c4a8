import type { Logger } from './types';

export const silentLogger: Logger = {};

/** Logs without ever throwing: a broken logger must not turn a handled failure into a crash. */
export function log(logger: Logger, level: keyof Logger, message: string, meta: Record<string, unknown> = {}): void {
  try {
    logger[level]?.(message, meta);
  } catch {
    // Nothing sensible to do with a logger that throws.
  }
}

/** pino's shape: the object first, then the message. */
export interface PinoLike {
  debug(obj: object, msg: string): void;
  info(obj: object, msg: string): void;
  warn(obj: object, msg: string): void;
  error(obj: object, msg: string): void;
}

/**
 * Our logger is called `(message, meta)`, console's order. pino takes `(obj, msg)`, and given a
 * string first it would treat `meta` as a format argument and drop it: this swaps them.
 */
export function pinoLogger(pino: PinoLike): Logger {
  return {
    debug: (message, meta = {}) => pino.debug(meta, message),
    info: (message, meta = {}) => pino.info(meta, message),
    warn: (message, meta = {}) => pino.warn(meta, message),
    error: (message, meta = {}) => pino.error(meta, message),
  };
}
