import { setTimeout as sleep } from 'node:timers/promises';
import { batchByKey } from 'batch-by-key';

/**
 * Shared by the web process (which pushes) and the worker process (which runs the slices).
 * Defining it connects nothing: Redis connections open on first use.
 */
export const SegmentRefresher = batchByKey({
  name: 'segment-refresher',
  connection: process.env.REDIS_URL ?? 'redis://localhost:6379',
  // Not console itself: the library logs every time-boxed yield at debug level.
  logger: { warn: console.warn, error: console.error },
  async eachIteration(segmentIds, ctx) {
    // A slice that returns is acked whole, so never return early with ids left over. Work that
    // takes ctx.signal throws on shutdown instead, and the whole slice is retried later.
    for (const segmentId of segmentIds) {
      await refreshSegment(ctx.key, segmentId, ctx.signal);
    }
  },
});

/** Stands in for the real work: recomputing one segment's members for one account. */
async function refreshSegment(accountId: string, segmentId: string, signal: AbortSignal): Promise<void> {
  await sleep(5, undefined, { signal });
  if (process.env.DEBUG_SEGMENTS) console.debug(`refreshed segment ${segmentId} of account ${accountId}`);
}
