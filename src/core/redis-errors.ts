/**
 * Whether `err` is an error reply from Redis (ioredis' `ReplyError`), by its name: a client the
 * caller built with another copy of ioredis throws that copy's class.
 */
export function isReplyError(err: unknown): boolean {
  return err instanceof Error && err.name === 'ReplyError';
}

/** Node's codes for a connection refused, reset or timed out. */
const CONNECTION_CODES = new Set(['ECONNREFUSED', 'ECONNRESET', 'EPIPE', 'ETIMEDOUT', 'ENOTCONN', 'EHOSTUNREACH']);

/**
 * The kind of Redis failure `err` is: a Redis error reply's code (OOM, BUSY, LOADING...), or
 * 'connection' for a connection lost or refused; undefined for any other error (a handler's own).
 */
export function redisFailureKind(err: unknown): string | undefined {
  if (!(err instanceof Error)) return undefined;
  if (isReplyError(err)) return /^[A-Z]+/.exec(err.message)?.[0] ?? 'reply';
  const code = (err as { code?: unknown }).code;
  const lost =
    (typeof code === 'string' && CONNECTION_CODES.has(code)) ||
    err.name === 'MaxRetriesPerRequestError' ||
    err.message === 'Connection is closed.';
  return lost ? 'connection' : undefined;
}
