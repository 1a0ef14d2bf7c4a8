import { SpanStatusCode, trace } from '@opentelemetry/api';
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor } from '@opentelemetry/sdk-trace-base';
import { afterAll, describe, expect, it } from 'vitest';
import { PermanentError, SLICE_SPAN, sliceTracing } from '../src';
import { tracingWith } from '../src/ops/tracing';
import { testBatcher, waitFor } from './helpers/redis';

const exporter = new InMemorySpanExporter();
trace.setGlobalTracerProvider(new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] }));
afterAll(() => trace.disable());

describe('sliceTracing', () => {
  it('runs every slice in a span with its key, ids and attempt, and records failures', async () => {
    const b = testBatcher({
      sliceSize: 2,
      attempts: 1,
      isolateFailures: false,
      around: sliceTracing(),
      eachIteration: (_ids, ctx) => {
        if (ctx.key === 'bad') throw new PermanentError('broken id');
      },
    });
    await b.performBatchLater(['1', '2', '3'], { key: 'good' });
    await b.performBatchLater(['x'], { key: 'bad' });
    b.createWorker();
    await waitFor(() => exporter.getFinishedSpans().filter((s) => s.attributes['batch_by_key.key'] !== undefined).length === 3, {
      what: 'three spans',
    });
    const spans = exporter
      .getFinishedSpans()
      .map((s) => ({ name: s.name, attributes: s.attributes, status: s.status.code, events: s.events.map((e) => e.name) }));
    expect(spans.filter((s) => s.attributes['batch_by_key.key'] === 'good')).toEqual([
      {
        name: SLICE_SPAN,
        attributes: { 'batch_by_key.key': 'good', 'batch_by_key.ids': 2, 'batch_by_key.attempt': 1 },
        status: SpanStatusCode.OK,
        events: [],
      },
      {
        name: SLICE_SPAN,
        attributes: { 'batch_by_key.key': 'good', 'batch_by_key.ids': 1, 'batch_by_key.attempt': 1 },
        status: SpanStatusCode.OK,
        events: [],
      },
    ]);
    const bad = exporter.getFinishedSpans().find((s) => s.attributes['batch_by_key.key'] === 'bad');
    expect(bad?.status).toEqual({ code: SpanStatusCode.ERROR, message: 'broken id' });
    expect(bad?.events.map((e) => [e.name, e.attributes?.['exception.message']])).toEqual([['exception', 'broken id']]);
  });

  it('is a pass-through without @opentelemetry/api', async () => {
    const middleware = tracingWith(undefined);
    let ran = false;
    await middleware({} as never, () => {
      ran = true;
      return Promise.resolve();
    });
    expect(ran).toBe(true);
    await expect(middleware({} as never, () => Promise.reject(new Error('kept')))).rejects.toThrow('kept');
  });
});
