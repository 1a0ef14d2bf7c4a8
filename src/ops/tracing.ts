import type * as OtelApi from '@opentelemetry/api';
import { loadOptional, requireOptional } from '../core/optional';
import type { SliceMiddleware } from '../core/types';
import type { OpenPushSpan } from '../push/push-span';
import { pushSpansWith, tracingWith } from './otel-spans';

/** The span of every slice; one name, so traces group by it (the key is an attribute). */
export const SLICE_SPAN = 'batch-by-key slice';

/** The span of every push with `tracePushes` (kind PRODUCER), linked from the slices that run its ids. */
export const PUSH_SPAN = 'batch-by-key push';

/**
 * An `around` middleware that runs each slice in an OpenTelemetry span (active for the handler,
 * so its own spans nest under it), with the key, the ids count and the attempt, and the error
 * recorded when the slice fails. A pass-through when `@opentelemetry/api` is not installed.
 *
 * The span links to the pushes whose ids the slice carries (their spans, where `performBatchLater`
 * was called inside a sampled one, or their own producer spans with `tracePushes`:
 * `slice.traceparents`): links, not a parent, since one slice may carry the ids of many unrelated
 * requests. Its parent is whatever span is active in the worker, usually none.
 */
export function sliceTracing(): SliceMiddleware {
  return tracingWith(loadOptional<typeof OtelApi>('@opentelemetry/api'), SLICE_SPAN);
}

/**
 * The option `tracePushes`: its spans, or undefined when it is off. Asked for by name, so a
 * missing `@opentelemetry/api` is a MissingDependencyError when the batcher is built.
 * @internal
 */
export function pushSpans(on: boolean): OpenPushSpan | undefined {
  return on ? pushSpansWith(requireOptional<typeof OtelApi>('@opentelemetry/api', 'options.tracePushes'), PUSH_SPAN) : undefined;
}
