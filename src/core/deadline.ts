/**
 * Waits for `work`, but at most `ms`: then rejects with what `timedOut()` returns (which may also
 * tell others, say abort a signal). `work` goes on; a rejection of it after the deadline is
 * dropped, since nobody waits for it any more.
 *
 * Work whose answer has arrived by the deadline wins, even if Node has not read it yet: timers run
 * before the event loop reads sockets, so a loop held past the deadline (a burst of pushes, a long
 * handler) would find the timer due with Redis's reply unread in the socket, and report a push
 * Redis stored as timed out. So the timer first lets one round of I/O run (setImmediate runs after
 * the loop's poll phase) and gives up only if `work` is still unsettled then; `timedOut()` is not
 * called for work that settled.
 */
export async function withDeadline<T>(work: Promise<T>, ms: number, timedOut: () => Error): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  let pending = true;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => {
      setImmediate(() => {
        if (pending) reject(timedOut());
      });
    }, ms);
  });
  const settled = () => {
    pending = false;
  };
  work.then(settled, settled);
  try {
    return await Promise.race([work, late]);
  } finally {
    clearTimeout(timer);
  }
}
