import type * as OtelApi from '@opentelemetry/api';
import { loadOptional } from '../core/optional';
import { spanContextOf } from '../core/trace-context';
import type { SliceMiddleware } from '../core/types';
import { VERSION } from '../core/version';

/** The span of every slice; one name, so traces group by it (the key is an attribute). */
export const SLICE_SPAN = 'batch-by-key slice';

/**
 * An `around` middleware that runs each slice in an OpenTelemetry span (active for the handler,
 * so its own spans nest under it), with the key, the ids count and the attempt, and the error
 * recorded when the slice fails. A pass-through when `@opentelemetry/api` is not installed.
 *
 * The span links to the pushes whose ids the slice carries (their spans, where `performBatchLater`
 * was called inside a sampled one: `slice.traceparents`): links, not a parent, since one slice may
 * carry the ids of many unrelated requests. Its parent is whatever span is active in the worker,
 * usually none.
 */
export function sliceTracing(): SliceMiddleware {
  return tracingWith(loadOptional<typeof OtelApi>('@opentelemetry/api'));
}

/** @internal */
export function tracingWith(api: typeof OtelApi | undefined): SliceMiddleware {
  if (!api) return (_slice, next) => next();
  return (slice, next) => {
    // Looked up per slice: a TracerProvider registered after the batcher is built still counts.
    const tracer = api.trace.getTracer('batch-by-key', VERSION);
    const attributes = { 'batch_by_key.key': slice.key, 'batch_by_key.ids': slice.ids.length, 'batch_by_key.attempt': slice.attempt };
    const links = slice.traceparents.flatMap((traceparent) => {
      const context = spanContextOf(traceparent);
      return context ? [{ context }] : [];
    });
    const options = { kind: api.SpanKind.CONSUMER, attributes, ...(links.length > 0 && { links }) };
    return tracer.startActiveSpan(SLICE_SPAN, options, async (span) => {
      try {
        await next();
        span.setStatus({ code: api.SpanStatusCode.OK });
      } catch (error) {
        span.recordException(error instanceof Error ? error : String(error));
        span.setStatus({ code: api.SpanStatusCode.ERROR, message: error instanceof Error ? error.message : String(error) });
        throw error;
      } finally {
        span.end();
      }
    });
  };
}
