import type { Key, StoreKind } from '../core/types';

/**
 * A push's producer span (`tracePushes`; made by ops/otel-spans.ts), as the push path sees it:
 * no type of `@opentelemetry/api`, an optional peer. Not active while the push runs: it is the
 * parent of nothing (one script call may carry many pushes; see storage/committer.ts); the slices
 * that run its ids link to it through the traceparent its ids carry.
 * @internal
 */
export interface PushSpan {
  /** Once the push's key is resolved and its input read. */
  planned(key: Key, ids: number, store: StoreKind): void;
  /** The W3C traceparent the push's ids carry: this span's, when its trace is sampled. */
  traceparent(): string | undefined;
  /**
   * The ids are stored; `covered`: the push's call found a run, or the key's waiting job, that
   * claims them; else the push saw to the key's job after its call (always on a Cluster, where
   * the call cannot see it; see storage/key-job.ts `afterPush`).
   */
  stored(covered: boolean): void;
  /** The push resolved. */
  end(): void;
  /** The push rejected with `error`. */
  fail(error: unknown): void;
}

/** Opens a push's span, a child of the span active where the push is made, if any. @internal */
export type OpenPushSpan = () => PushSpan;
