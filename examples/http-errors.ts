import type { BatchByKeyError } from 'batch-by-key';

/**
 * The HTTP status a controller that pushes answers a library error with, by its stable `code`:
 *
 * - 400: what the client sent is wrong (its ids, or the account that names the key), and
 *   nothing was written.
 * - 404: the open ticket the client pushed to is unknown (it expired after `ticketTtlMs`, or was
 *   never opened): nothing was written.
 * - 409: that ticket is sealed already: nothing was written, and no retry of that push will be.
 * - 429: the key's backlog is full (`maxPendingPerKey`, KeyBacklogFullError): nothing was
 *   written, and the same push may go through once the key's workers have drained some of it.
 * - 503: the service cannot take the push now and the client may retry: Redis did not answer
 *   within `pushTimeoutMs` (PushTimeoutError) or the push cannot tell whether its ids were stored
 *   (PushOutcomeUnknownError, say its connection closed in a failover): the ids may have landed,
 *   so a retried push may store them twice (delivery is at least once); or the batcher is closed
 *   because the process is shutting down (ClosedError).
 * - 500 for every other code: a mistake of the server's own (an option it passed, a store that
 *   differs from its workers'), not for the client to see.
 */
export function httpStatusOf(err: BatchByKeyError): 400 | 404 | 409 | 429 | 500 | 503 {
  switch (err.code) {
    case 'ERR_INVALID_IDS':
    case 'ERR_INVALID_KEY':
    case 'ERR_MISSING_KEY':
      return 400;
    case 'ERR_UNKNOWN_TICKET':
      return 404;
    case 'ERR_TICKET_SEALED':
      return 409;
    case 'ERR_KEY_BACKLOG_FULL':
      return 429;
    case 'ERR_PUSH_TIMEOUT':
    case 'ERR_PUSH_OUTCOME_UNKNOWN':
    case 'ERR_CLOSED':
      return 503;
    default:
      return 500;
  }
}
