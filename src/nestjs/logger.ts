import { Logger as NestLogger } from '@nestjs/common';
import type { Logger } from '../core/types';

/** Our `(message, meta)` as one line for Nest's logger, which prints objects on lines of their own. */
function line(message: string, meta: Record<string, unknown> = {}): string {
  const { err, ...rest } = meta;
  let text = message;
  // eslint-disable-next-line @typescript-eslint/no-base-to-string -- err is whatever was thrown; a non-Error shows as String() shows it, as in cli.ts
  if (err !== undefined) text += `: ${err instanceof Error ? err.message : String(err)}`;
  if (Object.keys(rest).length > 0) {
    try {
      text += ` ${JSON.stringify(rest)}`;
    } catch {
      // A meta that does not serialise is left out rather than failing the log call.
    }
  }
  return text;
}

/**
 * The default logger of batchers registered through `BatchByKeyModule`: Nest's own `Logger`
 * (context `BatchByKey`), so the library's warnings land where the application's logs go and
 * follow `app.useLogger(...)` and `logger: false`; `debug` maps to Nest's `verbose`. A batcher's own
 * `logger` option replaces it.
 * @internal
 */
export function nestLogger(context = 'BatchByKey'): Logger {
  const nest = new NestLogger(context);
  return {
    // Our debug lines come per interrupted run: Nest's quietest level, the first one turned off.
    debug: (message, meta) => nest.verbose(line(message, meta)),
    info: (message, meta) => nest.log(line(message, meta)),
    warn: (message, meta) => nest.warn(line(message, meta)),
    error: (message, meta) => {
      const err = meta?.err;
      if (err instanceof Error && err.stack !== undefined) nest.error(line(message, meta), err.stack);
      else nest.error(line(message, meta));
    },
  };
}
