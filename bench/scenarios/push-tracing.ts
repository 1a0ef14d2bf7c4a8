import { trace } from '@opentelemetry/api';
import {
  AlwaysOffSampler,
  AlwaysOnSampler,
  BasicTracerProvider,
  BatchSpanProcessor,
  type ReadableSpan,
  type Sampler,
  type SpanExporter,
} from '@opentelemetry/sdk-trace-base';
import { batchByKey } from '../../src';
import type { Config } from '../config';
import { withTimeout } from '../lib/clock';
import { inRounds, medianBy } from '../lib/repeat';
import { withFreshRedis } from '../lib/redis';
import { perSecond, ratio } from '../lib/stats';
import { fmtInt, medianOf, progress, spread } from './common';
import type { Scenario } from './types';

/** What the pushes of one run are traced with. */
interface Variant {
  label: string;
  tracePushes: boolean;
  /** A TracerProvider registered for the run, with this sampler; none: the API's no-op. */
  sampler?: Sampler;
}

const OFF = 'tracePushes off';
const SAMPLED = 'tracePushes on, sampled';
const UNSAMPLED = 'tracePushes on, not sampled';
const NO_PROVIDER = 'tracePushes on, no TracerProvider';

/** Pushes made before the measured ones, as a share of them. */
const WARM_UP_SHARE = 0.2;

const VARIANTS: readonly Variant[] = [
  { label: OFF, tracePushes: false },
  { label: NO_PROVIDER, tracePushes: true },
  { label: UNSAMPLED, tracePushes: true, sampler: new AlwaysOffSampler() },
  { label: SAMPLED, tracePushes: true, sampler: new AlwaysOnSampler() },
];

/** Exports nothing: the SDK's work per span (sampling, recording, batching) is counted, no exporter's. */
class DiscardingExporter implements SpanExporter {
  spans = 0;
  export(spans: ReadableSpan[], done: (result: { code: 0 }) => void): void {
    this.spans += spans.length;
    done({ code: 0 });
  }
  shutdown(): Promise<void> {
    return Promise.resolve();
  }
}

interface PushRun {
  variant: string;
  pushes: number;
  ms: number;
  pushesPerSec: number;
  clientCpuUsPerPush: number;
  redisCpuUsPerPush: number;
  spans: number;
}

async function pushOnce(variant: Variant, c: Config['pushTracing']): Promise<PushRun> {
  progress(`${variant.label}: ${fmtInt(c.pushes)} pushes of ${c.idsPerPush} ids, ${c.callers} callers`);
  const exporter = new DiscardingExporter();
  const provider =
    variant.sampler && new BasicTracerProvider({ sampler: variant.sampler, spanProcessors: [new BatchSpanProcessor(exporter)] });
  if (provider) trace.setGlobalTracerProvider(provider);
  try {
    return await withFreshRedis(async (redis) => {
      const batcher = batchByKey({ name: 'push-tracing', connection: redis.url, tracePushes: variant.tracePushes });
      try {
        const ids = (n: number) => Array.from({ length: c.idsPerPush }, (_, i) => `${n}-${i}`);
        const key = (n: number) => `key-${n % c.keys}`;
        const push = (from: number, to: number) => {
          let next = from;
          const caller = async () => {
            for (let n = next++; n < to; n = next++) await batcher.performBatchLater(ids(n), { key: key(n) });
          };
          return withTimeout(Promise.all(Array.from({ length: c.callers }, caller)), c.timeoutMs, `push-tracing ${variant.label}`);
        };
        // Scripts loaded, the store agreed on, every key's job added and the code warm before the clock starts.
        const warmUp = Math.max(c.keys, Math.round(c.pushes * WARM_UP_SHARE));
        await push(-warmUp, 0);
        await provider?.forceFlush();
        const spansBefore = exporter.spans;
        const redisCpu = await redis.cpuMicros();
        const cpu = process.cpuUsage();
        const started = performance.now();
        await push(0, c.pushes);
        const ms = performance.now() - started;
        const used = process.cpuUsage(cpu);
        const redisUs = (await redis.cpuMicros()) - redisCpu;
        await provider?.forceFlush();
        return {
          variant: variant.label,
          pushes: c.pushes,
          ms,
          pushesPerSec: perSecond(c.pushes, ms),
          clientCpuUsPerPush: (used.user + used.system) / c.pushes,
          redisCpuUsPerPush: redisUs / c.pushes,
          spans: exporter.spans - spansBefore,
        };
      } finally {
        await withTimeout(batcher.close(), 10_000, 'push-tracing batcher close');
      }
    });
  } finally {
    await provider?.shutdown();
    trace.disable();
  }
}

/**
 * What `tracePushes` costs a push: the same pushes with it off, on without a TracerProvider (the
 * API's no-op spans), on with one that samples nothing, and on with one that samples every span
 * (its ids then carry the span's traceparent, one hash field each). No worker runs: the pushes alone.
 */
export const pushTracing: Scenario = {
  id: 'push-tracing',
  async run(config) {
    const c = config.pushTracing;
    // A run left out of the figures: the first run of the process pays its JIT warm-up, whichever variant it is.
    await pushOnce(VARIANTS[0]!, c);
    const runs = (
      await inRounds(
        VARIANTS.map((variant) => () => pushOnce(variant, c)),
        c.repeats,
      )
    ).map((all) => ({
      ...medianBy(all, (r) => r.pushesPerSec),
      runsPushesPerSec: all.map((r) => r.pushesPerSec),
    }));
    const of = (label: string) => runs.find((r) => r.variant === label);
    return {
      id: 'push-tracing',
      title: 'Push tracing: what tracePushes costs a push',
      setup:
        `${fmtInt(c.pushes)} pushes of ${c.idsPerPush} ids over ${c.keys} keys (list store, no worker), ${c.callers} callers each ` +
        `awaiting its push before the next; spans go to a BatchSpanProcessor whose exporter drops them${medianOf(c.repeats)}.`,
      columns: [
        { key: 'variant', label: 'variant' },
        { key: 'pushesPerSec', label: 'pushes/s (median)' },
        ...(c.repeats > 1 ? [{ key: 'spread', label: 'pushes/s of each run (min–max)' }] : []),
        { key: 'clientCpuUsPerPush', label: 'client CPU µs/push', digits: 1 },
        { key: 'redisCpuUsPerPush', label: 'Redis CPU µs/push', digits: 1 },
        { key: 'spans', label: 'spans exported' },
      ],
      rows: runs.map(({ runsPushesPerSec, ms: _ms, pushes: _pushes, ...r }) => ({ ...r, spread: spread(runsPushesPerSec) })),
      ratios: [
        { name: 'pushes/s: on, sampled / off', value: ratio(of(SAMPLED)?.pushesPerSec, of(OFF)?.pushesPerSec) },
        { name: 'pushes/s: on, not sampled / off', value: ratio(of(UNSAMPLED)?.pushesPerSec, of(OFF)?.pushesPerSec) },
        { name: 'pushes/s: on, no TracerProvider / off', value: ratio(of(NO_PROVIDER)?.pushesPerSec, of(OFF)?.pushesPerSec) },
        { name: 'client CPU per push: on, sampled / off', value: ratio(of(SAMPLED)?.clientCpuUsPerPush, of(OFF)?.clientCpuUsPerPush) },
        { name: 'Redis CPU per push: on, sampled / off', value: ratio(of(SAMPLED)?.redisCpuUsPerPush, of(OFF)?.redisCpuUsPerPush) },
      ],
      notes: [
        'Off, a push takes the path it took before tracePushes existed (one branch more: no span, closure or await), so the off row is ' +
          'also the cost before it; client CPU is the whole bench process (pushes, ioredis, the span processor)',
      ],
      details: runs,
    };
  },
};
