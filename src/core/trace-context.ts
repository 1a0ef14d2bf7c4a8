import type * as OtelApi from '@opentelemetry/api';
import { loadOptional } from './optional';

type Api = typeof OtelApi;

/** The API once looked for: null when it is not installed (a failed require is not cheap: once). */
let installed: Api | null | undefined;

/**
 * The W3C traceparent (`00-<traceId>-<spanId>-<flags>`) of the span active where a push is made,
 * for its ids to carry to the slices that run them (see ops/tracing.ts). Undefined, and nothing
 * recorded, without `@opentelemetry/api`, without an active span, or when that span's trace is
 * not sampled: a link to a trace no backend keeps would cost every id of the push for nothing.
 */
export function activeTraceparent(): string | undefined {
  if (installed === undefined) installed = loadOptional<Api>('@opentelemetry/api') ?? null;
  return installed ? traceparentIn(installed) : undefined;
}

const TRACE_ID = /^[0-9a-f]{32}$/;
const SPAN_ID = /^[0-9a-f]{16}$/;
const FLAGS = /^[0-9a-f]{2}$/;
const INVALID_TRACE_ID = '0'.repeat(32);
const INVALID_SPAN_ID = '0'.repeat(16);
/** W3C trace-context's `sampled` flag (the API's TraceFlags.SAMPLED). */
const SAMPLED = 1;

function traceparentIn(api: Api): string | undefined {
  return traceparentOf(api.trace.getSpanContext(api.context.active()));
}

/** A span's W3C traceparent, for ids to carry: undefined for none, or an unsampled or invalid one. */
export function traceparentOf(span: OtelApi.SpanContext | undefined): string | undefined {
  if (!span || (span.traceFlags & SAMPLED) === 0 || !validIds(span.traceId, span.spanId)) return undefined;
  // Only sampled spans get here, so the flags are always `sampled` alone.
  return `00-${span.traceId}-${span.spanId}-01`;
}

/** What a link needs of a push's traceparent: its span context, remote (it was made in another process, or call). */
export function spanContextOf(traceparent: string): OtelApi.SpanContext | undefined {
  const [version, traceId = '', spanId = '', flags = ''] = traceparent.split('-');
  if (version !== '00' || !FLAGS.test(flags) || !validIds(traceId, spanId)) return undefined;
  return { traceId, spanId, traceFlags: Number.parseInt(flags, 16), isRemote: true };
}

function validIds(traceId: string, spanId: string): boolean {
  return TRACE_ID.test(traceId) && SPAN_ID.test(spanId) && traceId !== INVALID_TRACE_ID && spanId !== INVALID_SPAN_ID;
}
