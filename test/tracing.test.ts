import { AsyncLocalStorage } from 'node:async_hooks';
import {
  context,
  ROOT_CONTEXT,
  SpanKind,
  SpanStatusCode,
  trace,
  TraceFlags,
  type Context,
  type ContextManager,
  type SpanContext,
} from '@opentelemetry/api';
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor, type ReadableSpan } from '@opentelemetry/sdk-trace-base';
import { afterAll, describe, expect, it } from 'vitest';
import {
  InvalidOptionError,
  KeyBacklogFullError,
  PermanentError,
  PUSH_SPAN,
  SLICE_SPAN,
  sliceTracing,
  type Batcher,
  type StoreKind,
} from '../src';
import { spanContextOf } from '../src/core/trace-context';
import { tracingWith } from '../src/ops/otel-spans';
import { keyspaceOf, onCluster, range, redisClient, testBatcher, waitFor } from './helpers/redis';

/**
 * A context manager on AsyncLocalStorage (what @opentelemetry/context-async-hooks does), so that
 * a request span is active across the awaits of the push made in it.
 */
class LocalContextManager implements ContextManager {
  private readonly storage = new AsyncLocalStorage<Context>();
  active(): Context {
    return this.storage.getStore() ?? ROOT_CONTEXT;
  }
  with<A extends unknown[], F extends (...args: A) => ReturnType<F>>(ctx: Context, fn: F, thisArg?: ThisParameterType<F>, ...args: A) {
    return this.storage.run(ctx, () => fn.apply(thisArg, args));
  }
  bind<T>(_ctx: Context, target: T): T {
    return target;
  }
  enable(): this {
    return this;
  }
  disable(): this {
    this.storage.disable();
    return this;
  }
}

const exporter = new InMemorySpanExporter();
trace.setGlobalTracerProvider(new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] }));
context.setGlobalContextManager(new LocalContextManager());
afterAll(() => {
  trace.disable();
  context.disable();
});

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
    const middleware = tracingWith(undefined, SLICE_SPAN);
    let ran = false;
    await middleware({} as never, () => {
      ran = true;
      return Promise.resolve();
    });
    expect(ran).toBe(true);
    await expect(middleware({} as never, () => Promise.reject(new Error('kept')))).rejects.toThrow('kept');
  });
});

describe('links from a slice to the pushes of its ids', () => {
  const tracer = trace.getTracer('test');

  /** Pushes `ids` inside a request span of a trace of its own; returns that span's context. */
  async function pushInRequest(b: Batcher, ids: string[], key: string): Promise<SpanContext> {
    return tracer.startActiveSpan('request', async (span) => {
      await b.performBatchLater(ids, { key });
      span.end();
      return span.spanContext();
    });
  }

  const slicesOf = (key: string): ReadableSpan[] =>
    exporter.getFinishedSpans().filter((s) => s.name === SLICE_SPAN && s.attributes['batch_by_key.key'] === key);
  // Sorted: a slice's links come in no particular order.
  const linked = (span: ReadableSpan | undefined) =>
    span?.links.map((l) => [l.context.traceId, l.context.spanId, l.context.isRemote]).sort((x, y) => String(x).localeCompare(String(y)));
  const asLinks = (...contexts: SpanContext[]) => contexts.map(asLink).sort((x, y) => String(x).localeCompare(String(y)));
  const asLink = (c: SpanContext) => [c.traceId, c.spanId, true];

  function setup(store: StoreKind, eachIteration: (ids: string[]) => void = () => undefined) {
    const processed: string[] = [];
    const b = testBatcher({
      store,
      sliceSize: 10,
      around: sliceTracing(),
      backoff: { type: 'fixed', delayMs: 10 },
      eachIteration: (ids) => {
        eachIteration(ids);
        processed.push(...ids);
      },
    });
    return { b, processed, redis: redisClient(), names: (key: string) => keyspaceOf(b).forKey(key) };
  }

  it.each(['list', 'set', 'zset'] as const)('%s: a push in a request span is linked from the slice that carries its ids', async (store) => {
    const key = `one-${store}`;
    const { b, processed, redis, names } = setup(store);
    const request = await pushInRequest(b, ['a', 'b'], key);
    expect(await redis.hgetall(names(key).traces)).toEqual({
      a: `00-${request.traceId}-${request.spanId}-01`,
      b: `00-${request.traceId}-${request.spanId}-01`,
    });
    b.createWorker();
    await waitFor(() => slicesOf(key).length === 1, { what: 'the slice span' });
    const [slice] = slicesOf(key);
    expect(linked(slice)).toEqual([asLink(request)]);
    // A link, not a parent: the slice is no part of the request's trace.
    expect(slice?.spanContext().traceId).not.toBe(request.traceId);
    expect(processed.sort()).toEqual(['a', 'b']);
    // The claim took the entries along; the run's end dropped the extras mark they set.
    await waitFor(async () => (await redis.exists(names(key).lock)) === 0, { what: 'the run to end' });
    expect(await redis.exists(names(key).traces, names(key).extras)).toBe(0);
  });

  it('pushes that share a script call (group commit) each keep their own trace context', async () => {
    const key = 'shared-call';
    const { b, redis, names } = setup('list');
    // At once: the first goes alone, the others wait for it and share the next call.
    const requests = await Promise.all(range(6).map((i) => pushInRequest(b, [`id-${i}`], key)));
    expect(await redis.hgetall(names(key).traces)).toEqual(
      Object.fromEntries(requests.map((r, i) => [`id-${i}`, `00-${r.traceId}-${r.spanId}-01`])),
    );
  });

  it("trace context no claim took (an earlier version's worker claimed its ids) goes at the end of a run that leaves nothing waiting", async () => {
    const key = 'stale';
    const { b, processed, redis, names } = setup('list');
    await pushInRequest(b, ['a'], key);
    // As an earlier version's claim would leave it: its id claimed and gone, its entry kept.
    await redis.hset(names(key).traces, 'gone', '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01');
    b.createWorker();
    await waitFor(() => processed.length === 1, { what: 'the id' });
    await waitFor(async () => (await redis.exists(names(key).lock)) === 0, { what: 'the run to end' });
    expect(await redis.exists(names(key).traces, names(key).extras)).toBe(0);
  });

  it.each(['list', 'set'] as const)('%s: a slice with the ids of two requests links to both', async (store) => {
    const key = `two-${store}`;
    const { b } = setup(store);
    const first = await pushInRequest(b, ['a', 'b'], key);
    const second = await pushInRequest(b, ['c', 'a'], key);
    expect(first.traceId).not.toBe(second.traceId);
    b.createWorker();
    await waitFor(() => slicesOf(key).length > 0, { what: 'the slice span' });
    const spans = slicesOf(key);
    // 'a' links to the first push of it while it waited (a set merged the second into it).
    expect(spans.map(linked)).toEqual([asLinks(first, second)]);
    expect(spans.reduce((n, s) => n + Number(s.attributes['batch_by_key.ids']), 0)).toBe(store === 'list' ? 4 : 3);
  });

  it('a push without an active span, or in an unsampled trace, writes no trace context and gets no link', async () => {
    const key = 'untraced';
    const { b, processed, redis, names } = setup('list');
    await b.performBatchLater(['a'], { key });
    const unsampled = trace.wrapSpanContext({ traceId: '1'.repeat(32), spanId: '2'.repeat(16), traceFlags: TraceFlags.NONE });
    await context.with(trace.setSpan(context.active(), unsampled), () => b.performBatchLater(['b'], { key }));
    // Nothing but the ids and their lag marks: not even the extras mark (a claim reads nothing more).
    expect(await redis.exists(names(key).traces, names(key).extras)).toBe(0);
    // Without tracePushes a push opens no span of its own.
    expect(exporter.getFinishedSpans().filter((s) => s.name === PUSH_SPAN && s.attributes['batch_by_key.key'] === key)).toEqual([]);
    b.createWorker();
    await waitFor(() => processed.length === 2 && slicesOf(key).length > 0, { what: 'the slice' });
    expect(slicesOf(key).flatMap(linked)).toEqual([]);
  });

  it("a failed slice's retries, and the parts it is split in, keep the links of their own ids", async () => {
    const key = 'retried';
    let runs = 0;
    const b = testBatcher({
      sliceSize: 10,
      attempts: 2,
      backoff: { type: 'fixed', delayMs: 10 },
      around: sliceTracing(),
      eachIteration: (ids) => {
        runs++;
        if (ids.includes('bad')) throw new Error('bad id');
      },
    });
    const first = await pushInRequest(b, ['ok'], key);
    const second = await pushInRequest(b, ['bad'], key);
    b.createWorker();
    // Two runs of the whole slice, then one run of each half.
    await waitFor(() => slicesOf(key).length === 4 && runs === 4, { what: 'the runs' });
    const spans = slicesOf(key).map((s) => ({
      ids: s.attributes['batch_by_key.ids'],
      attempt: s.attributes['batch_by_key.attempt'],
      links: linked(s),
    }));
    expect(spans).toEqual([
      { ids: 2, attempt: 1, links: asLinks(first, second) },
      { ids: 2, attempt: 2, links: asLinks(first, second) },
      { ids: 1, attempt: 3, links: [asLink(first)] },
      { ids: 1, attempt: 3, links: [asLink(second)] },
    ]);
  });

  it('reads a traceparent back into a remote span context, and nothing else', () => {
    expect(spanContextOf(`00-${'a'.repeat(32)}-${'b'.repeat(16)}-01`)).toEqual({
      traceId: 'a'.repeat(32),
      spanId: 'b'.repeat(16),
      traceFlags: TraceFlags.SAMPLED,
      isRemote: true,
    });
    for (const bad of [
      '',
      '01-' + 'a'.repeat(32) + '-' + 'b'.repeat(16) + '-01',
      `00-${'0'.repeat(32)}-${'b'.repeat(16)}-01`,
      `00-${'a'.repeat(32)}-${'b'.repeat(16)}`,
    ]) {
      expect(spanContextOf(bad)).toBeUndefined();
    }
  });
});

describe('tracePushes: a producer span per push', () => {
  const tracer = trace.getTracer('test');
  const pushSpansOf = (key: string): ReadableSpan[] =>
    exporter.getFinishedSpans().filter((s) => s.name === PUSH_SPAN && s.attributes['batch_by_key.key'] === key);
  const slicesOf = (key: string): ReadableSpan[] =>
    exporter.getFinishedSpans().filter((s) => s.name === SLICE_SPAN && s.attributes['batch_by_key.key'] === key);
  const traceparentOf = (span: ReadableSpan) => `00-${span.spanContext().traceId}-${span.spanContext().spanId}-01`;

  function setup(store: StoreKind, options: { maxPendingPerKey?: number } = {}) {
    const processed: string[] = [];
    const b = testBatcher({
      store,
      sliceSize: 10,
      tracePushes: true,
      around: sliceTracing(),
      eachIteration: (ids) => {
        processed.push(...ids);
      },
      ...options,
    });
    return { b, processed, redis: redisClient(), names: (key: string) => keyspaceOf(b).forKey(key) };
  }

  it.each(['list', 'set', 'zset'] as const)(
    '%s: each push emits one PRODUCER span, its ids carry its context, and the slice that runs them links to it',
    async (store) => {
      const key = `produced-${store}`;
      const { b, processed, redis, names } = setup(store);
      await b.performBatchLater(['a', 'b'], { key });
      // The key's job waits: this push is covered by it, but on a Cluster its call cannot see the
      // job (another slot), and the push makes sure of it after its call.
      await b.performBatchLater(['c'], { key });
      const pushes = pushSpansOf(key);
      expect(
        pushes.map((s) => ({ kind: s.kind, attributes: s.attributes, status: s.status.code, parent: s.parentSpanContext?.spanId })),
      ).toEqual([
        {
          kind: SpanKind.PRODUCER,
          attributes: { 'batch_by_key.key': key, 'batch_by_key.ids': 2, 'batch_by_key.store': store, 'batch_by_key.outcome': 'ensured' },
          status: SpanStatusCode.OK,
          parent: undefined,
        },
        {
          kind: SpanKind.PRODUCER,
          attributes: {
            'batch_by_key.key': key,
            'batch_by_key.ids': 1,
            'batch_by_key.store': store,
            'batch_by_key.outcome': onCluster() ? 'ensured' : 'covered',
          },
          status: SpanStatusCode.OK,
          parent: undefined,
        },
      ]);
      const [first, second] = pushes as [ReadableSpan, ReadableSpan];
      expect(await redis.hgetall(names(key).traces)).toEqual({
        a: traceparentOf(first),
        b: traceparentOf(first),
        c: traceparentOf(second),
      });
      b.createWorker();
      await waitFor(() => processed.length === 3 && slicesOf(key).length === 1, { what: 'the slice span' });
      const links = slicesOf(key)[0]!
        .links.map((l) => l.context.spanId)
        .sort();
      expect(links).toEqual([first.spanContext().spanId, second.spanContext().spanId].sort());
    },
  );

  it("a push inside the caller's sampled span: the producer span is its child, and the ids carry the producer span's context", async () => {
    const key = 'produced-in-request';
    const { b, redis, names } = setup('list');
    const request = await tracer.startActiveSpan('request', async (span) => {
      await b.performBatchLater(['a'], { key });
      span.end();
      return span.spanContext();
    });
    const [produced] = pushSpansOf(key);
    expect(produced?.spanContext().traceId).toBe(request.traceId);
    expect(produced?.parentSpanContext?.spanId).toBe(request.spanId);
    expect(await redis.hgetall(names(key).traces)).toEqual({ a: traceparentOf(produced!) });
  });

  it('a push in an unsampled trace: its span is not sampled either, and its ids carry no context', async () => {
    const key = 'produced-unsampled';
    const { b, redis, names } = setup('list');
    const unsampled = trace.wrapSpanContext({ traceId: '3'.repeat(32), spanId: '4'.repeat(16), traceFlags: TraceFlags.NONE });
    await context.with(trace.setSpan(context.active(), unsampled), () => b.performBatchLater(['a'], { key }));
    expect(pushSpansOf(key)).toEqual([]);
    expect(await redis.exists(names(key).traces, names(key).extras)).toBe(0);
  });

  it('a push that rejects records its error on its span', async () => {
    const key = 'produced-refused';
    const { b } = setup('list', { maxPendingPerKey: 1 });
    await expect(b.performBatchLater(['a', 'b'], { key })).rejects.toBeInstanceOf(KeyBacklogFullError);
    const [refused] = pushSpansOf(key);
    expect(refused?.attributes).toEqual({ 'batch_by_key.key': key, 'batch_by_key.ids': 2, 'batch_by_key.store': 'list' });
    expect(refused?.status.code).toBe(SpanStatusCode.ERROR);
    expect(refused?.events.map((e) => e.name)).toEqual(['exception']);
  });

  it('tracePushes must be a boolean', () => {
    expect(() => testBatcher({ tracePushes: 'yes' as never, eachIteration: () => undefined })).toThrow(InvalidOptionError);
    expect(() => testBatcher({ tracePushes: 'yes' as never, eachIteration: () => undefined })).toThrow(
      /options.tracePushes must be a boolean, got "yes"/,
    );
  });
});
