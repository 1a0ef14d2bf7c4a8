/**
 * Waits for `work`, but at most `ms`: then rejects with what `timedOut()` returns (which may also
 * tell others, say abort a signal). `work` goes on; a rejection of it after the deadline is
 * dropped, since nobody waits for it any more.
 */
export async function withDeadline<T>(work: Promise<T>, ms: number, timedOut: () => Error): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(timedOut()), ms);
  });
  work.catch(() => undefined);
  try {
    return await Promise.race([work, late]);
  } finally {
    clearTimeout(timer);
  }
}
