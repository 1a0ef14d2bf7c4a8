import type * as OtelApi from '@opentelemetry/api';
import { spanContextOf, traceparentOf } from '../core/trace-context';
import type { SliceMiddleware } from '../core/types';
import { VERSION } from '../core/version';
import type { OpenPushSpan } from '../push/push-span';

type Api = typeof OtelApi;

/**
 * `sliceTracing()` given the API (undefined: not installed) and its span's name. Apart from
 * tracing.ts so that no public declaration names a type of `@opentelemetry/api`, an optional peer:
 * an app without it, type-checked with `skipLibCheck: false`, would fail on the import.
 * @internal
 */
export function tracingWith(api: Api | undefined, spanName: string): SliceMiddleware {
  if (!api) return (_slice, next) => next();
  return (slice, next) => {
    const attributes = { 'batch_by_key.key': slice.key, 'batch_by_key.ids': slice.ids.length, 'batch_by_key.attempt': slice.attempt };
    const links = slice.traceparents.flatMap((traceparent) => {
      const context = spanContextOf(traceparent);
      return context ? [{ context }] : [];
    });
    const options = { kind: api.SpanKind.CONSUMER, attributes, ...(links.length > 0 && { links }) };
    return tracerOf(api).startActiveSpan(spanName, options, async (span) => {
      try {
        await next();
        succeeded(api, span);
      } catch (error) {
        failed(api, span, error);
        throw error;
      }
    });
  };
}

/**
 * `tracePushes`: a PRODUCER span per push, named `spanName`, child of the span active where the
 * push is made (or a root). Never made active: the push's Redis calls may be shared with other
 * pushes (group commit), so nothing is its child; its context is what the push's ids carry.
 * @internal
 */
export function pushSpansWith(api: Api, spanName: string): OpenPushSpan {
  return () => {
    const span = tracerOf(api).startSpan(spanName, { kind: api.SpanKind.PRODUCER });
    return {
      planned: (key, ids, store) => {
        span.setAttributes({ 'batch_by_key.key': key, 'batch_by_key.ids': ids, 'batch_by_key.store': store });
      },
      traceparent: () => traceparentOf(span.spanContext()),
      stored: (covered) => {
        span.setAttribute('batch_by_key.outcome', covered ? 'covered' : 'ensured');
      },
      end: () => succeeded(api, span),
      fail: (error) => failed(api, span, error),
    };
  };
}

/** Looked up per span: a TracerProvider registered after the batcher is built still counts. */
function tracerOf(api: Api): OtelApi.Tracer {
  return api.trace.getTracer('batch-by-key', VERSION);
}

function succeeded(api: Api, span: OtelApi.Span): void {
  span.setStatus({ code: api.SpanStatusCode.OK });
  span.end();
}

function failed(api: Api, span: OtelApi.Span, error: unknown): void {
  span.recordException(error instanceof Error ? error : String(error));
  span.setStatus({ code: api.SpanStatusCode.ERROR, message: error instanceof Error ? error.message : String(error) });
  span.end();
}
