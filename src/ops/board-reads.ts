import type { Level, LevelName, KeyQueue } from '../storage/job';
import type { Batcher, Key, KeyStats, Logger } from '../core/types';

/**
 * What `bullBoardAdapters` reads of a batcher beside its public methods, registered by
 * createBatcher (the wiring sits above ops, so ops cannot reach into it).
 * @internal
 */
export interface BoardReads {
  /** The BullMQ queues of the batcher's own shard count, shard 0 first (a ClosedError once closed). */
  queues(): KeyQueue[];
  /** These keys' backlogs and lag, in one batch of reads, and the Redis clock they were read by. */
  readKeys(keys: readonly Key[]): Promise<{ at: number; keys: KeyStats[] }>;
  /** The BullMQ priority of each level of the batcher's normal keys (see storage/job.ts `levelsOf`). */
  levels: Readonly<Record<LevelName, Level>>;
  /** Where a failed read is reported: the page is shown without it. */
  logger: Logger;
}

const registered = new WeakMap<Batcher, BoardReads>();

/** @internal */
export function registerBoardReads(batcher: Batcher, reads: BoardReads): void {
  registered.set(batcher, reads);
}

/** A batcher's board reads; undefined for anything createBatcher did not make. @internal */
export function boardReadsOf(batcher: unknown): BoardReads | undefined {
  return typeof batcher === 'object' && batcher !== null ? registered.get(batcher as Batcher) : undefined;
}
