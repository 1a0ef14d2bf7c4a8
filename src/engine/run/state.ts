import type { Fill } from '../../core/fill';
import type { Stop } from '../../core/stop';
import type { EachIteration, KeyJob, RateLimit } from '../../core/types';
import type { KeySession } from '../../storage/key-session';
import type { ClaimTransport } from '../claims/transport';
import type { InterruptCheck } from '../interrupt';
import type { RunEnv } from '../run-env';
import type { RunLimits } from './limits';

/** Whether the run of the job under `token` must hand its job back before its next slice, for a lowered concurrency (see ShardWorker.shed). */
export type Shed = (token: string) => boolean;

/**
 * What one run of a key's job is once it holds the key (see key-run.ts): built once, then read by
 * its lanes (lanes.ts) and their slices (slice.ts). Its `session` is the key's under the run's
 * lock, its `stop` the run's one stop (a shutdown, a lost lock), its `handler` the one read at its
 * start; `rate` and `fill` are the key's, read once.
 */
export interface RunState {
  readonly env: RunEnv;
  readonly job: KeyJob;
  readonly token: string;
  readonly session: KeySession;
  readonly claims: ClaimTransport;
  readonly limits: RunLimits;
  readonly shed: Shed | undefined;
  readonly handler: EachIteration;
  readonly stop: Stop;
  readonly rate: RateLimit | undefined;
  readonly fill: Fill | undefined;
  readonly interrupts: readonly InterruptCheck[];
}

/** The id of a lane's n-th slice of a run (its claim's id too). */
export function sliceIdOf(lock: string, lane: number, n: number): string {
  return `${lock}:${lane}:${n}`;
}
