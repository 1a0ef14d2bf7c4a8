import { redisFailureKind } from './redis-errors';
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

/** A kind of Redis failure is logged at most once per this interval (see `incidentLogger`). */
export const LOG_REPEAT_INTERVAL_MS = 1_000;

/**
 * The batcher's logger: warnings and errors caused by a Redis failure are logged once per kind
 * (level, message and the failure's kind) per `intervalMs`, and the repeats of an interval in
 * one line at its end, with their count (`repeated`): during an incident every run, fetch and
 * sweep fails at once, and logging each failure (thousands of lines a second) would bury the
 * one line that says what happened, and slow the worker down. Everything else goes out as is.
 */
export function incidentLogger(logger: Logger, intervalMs = LOG_REPEAT_INTERVAL_MS): Logger {
  const repeats = new Map<string, { count: number; meta: Record<string, unknown> }>();
  const open = (id: string, level: 'warn' | 'error', message: string): void => {
    const window = { count: 0, meta: {} };
    repeats.set(id, window);
    setTimeout(() => {
      if (window.count === 0) return void repeats.delete(id);
      log(logger, level, message, { ...window.meta, repeated: window.count, withinMs: intervalMs });
      open(id, level, message);
    }, intervalMs).unref();
  };
  const limited =
    (level: 'warn' | 'error') =>
    (message: string, meta: Record<string, unknown> = {}): void => {
      const kind = redisFailureKind(meta.err);
      if (kind === undefined) return log(logger, level, message, meta);
      const id = `${level} ${kind} ${message}`;
      const window = repeats.get(id);
      if (window) {
        window.count++;
        window.meta = meta;
        return;
      }
      log(logger, level, message, meta);
      open(id, level, message);
    };
  return {
    debug: (message, meta) => log(logger, 'debug', message, meta),
    info: (message, meta) => log(logger, 'info', message, meta),
    warn: limited('warn'),
    error: limited('error'),
  };
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
