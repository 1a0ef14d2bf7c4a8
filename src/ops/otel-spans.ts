import type * as OtelApi from '@opentelemetry/api';
import { spanContextOf } from '../core/trace-context';
import type { SliceMiddleware } from '../core/types';
import { VERSION } from '../core/version';

/**
 * `sliceTracing()` given the API (undefined: not installed) and its span's name. Apart from
 * tracing.ts so that no public declaration names a type of `@opentelemetry/api`, an optional peer:
 * an app without it, type-checked with `skipLibCheck: false`, would fail on the import.
 * @internal
 */
export function tracingWith(api: typeof OtelApi | undefined, spanName: string): SliceMiddleware {
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
    return tracer.startActiveSpan(spanName, options, async (span) => {
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
