import type { Counter, Gauge, Histogram, Registry } from 'prom-client';
import { describe, InvalidOptionError } from '../core/errors';
import { requireOptional } from '../core/optional';
import { isArray } from '../core/validate';
import type { Batcher, Stats, StatsOptions } from '../core/types';

type PromClient = typeof import('prom-client');

/** A prom-client `Registry`, typed structurally so our .d.ts never needs prom-client installed. */
export interface MetricsRegistry {
  metrics(): Promise<string>;
  readonly contentType: string;
  removeSingleMetric(name: string): void;
}

export interface PrometheusOptions {
  /** Where the metrics are registered (a prom-client `Registry`). @default prom-client's global `register` */
  registry?: MetricsRegistry;
  /** Prepended to every metric name. @default 'batch_by_key_' */
  prefix?: string;
  /** For the gauges, read by one `stats()` per batcher per scrape. @default { maxKeys: 10000, top: 1 } */
  stats?: StatsOptions;
  /**
   * Observe push-to-processed latency (from `slice:done`'s `waitedMs`, which the claim returns at no extra cost).
   * @default true
   */
  latency?: boolean;
}

export interface PrometheusMetrics {
  registry: MetricsRegistry;
  /** Stops counting and removes the metrics from the registry. */
  close(): void;
}

/** Scrapes within this long share one `stats()` reading: every gauge is collected from it. */
const READING_TTL_MS = 1000;
const SECONDS = [0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 10, 30, 60, 300];
const LATENCY_SECONDS = [0.01, 0.1, 0.5, 1, 5, 15, 60, 300, 900, 3600, 6 * 3600, 24 * 3600];

/**
 * Prometheus metrics of batchers. Counters and histograms count what this process saw (pushes
 * here, slices of workers here); gauges read Redis on scrape, so any process can export them.
 */
export function prometheusMetrics(batchers: readonly Batcher[], options: PrometheusOptions = {}): PrometheusMetrics {
  if (!isArray(batchers) || batchers.length === 0) throw new InvalidOptionError('prometheusMetrics needs a non-empty array of batchers');
  if (typeof options !== 'object' || options === null)
    throw new InvalidOptionError(`prometheusMetrics options must be an object, got ${describe(options)}`);
  const prefix = options.prefix ?? 'batch_by_key_';
  if (!/^[a-zA-Z_:][a-zA-Z0-9_:]*$/.test(prefix))
    throw new InvalidOptionError(`prometheusMetrics prefix must be a valid metric name prefix, got ${describe(prefix)}`);
  const prom = requireOptional<PromClient>('prom-client', 'prometheusMetrics');
  const registry = (options.registry as Registry | undefined) ?? prom.register;
  const statsOptions: StatsOptions = { maxKeys: 10_000, top: 1, ...options.stats };
  const registers = [registry];
  const labelNames = ['batcher'] as const;

  let reading: { at: number; stats: Promise<Stats[]> } | undefined;
  const read = (): Promise<Stats[]> => {
    if (!reading || Date.now() - reading.at > READING_TTL_MS) {
      reading = { at: Date.now(), stats: Promise.all(batchers.map((b) => b.stats(statsOptions))) };
    }
    return reading.stats;
  };
  const gauge = (name: string, help: string, value: (s: Stats) => number): Gauge<'batcher'> =>
    new prom.Gauge({
      name: prefix + name,
      help,
      labelNames,
      registers,
      async collect() {
        for (const s of await read()) this.set({ batcher: s.name }, value(s));
      },
    });
  const counter = (name: string, help: string, labels: readonly string[] = labelNames): Counter<string> =>
    new prom.Counter({ name: prefix + name, help, labelNames: labels, registers });
  const histogram = (name: string, help: string, buckets: number[]): Histogram<'batcher'> =>
    new prom.Histogram({ name: prefix + name, help, labelNames, buckets, registers });

  const pushed = counter('ids_pushed_total', 'Ids pushed by this process');
  const processed = counter('ids_processed_total', 'Ids of slices that succeeded in this process');
  const failed = counter('ids_failed_total', 'Ids of slices that failed in this process, by what became of the slice', [
    'batcher',
    'outcome',
  ]);
  const dead = counter('ids_dead_lettered_total', 'Ids dead-lettered by this process');
  const sliceSeconds = histogram('slice_duration_seconds', 'Duration of slices (successful or failed) run in this process', SECONDS);
  const latency = histogram(
    'push_to_processed_seconds',
    "Per slice, from its oldest id's push (list; see README for set and zset) to the slice's success",
    LATENCY_SECONDS,
  );
  const gauges = [
    gauge('keys', 'Keys holding ids', (s) => s.keys),
    gauge('pending_ids', 'Ids waiting to be claimed', (s) => s.pending),
    gauge('in_flight_ids', 'Ids claimed by a running slice', (s) => s.inFlight),
    gauge('retrying_ids', 'Ids of failed slices backing off', (s) => s.retrying),
    gauge('dead_letters', 'Dead letters kept', (s) => s.dead),
    gauge('lag_seconds', 'Age of the oldest pending id', (s) => s.oldestPendingAgeMs / 1000),
    // The batcher-wide limits (0: none), their use, and the time keys waited for them.
    gauge('global_rate_limit_ids', 'globalRateLimit: ids allowed per window (0: none)', (s) => s.limits.rate?.max ?? 0),
    gauge('global_rate_limit_window_seconds', "globalRateLimit's window", (s) => (s.limits.rate?.durationMs ?? 0) / 1000),
    gauge('global_rate_limit_used_ids', 'Ids claimed within the globalRateLimit window now', (s) => s.limits.rate?.used ?? 0),
    gauge('global_concurrency_limit', 'globalConcurrency: slices allowed at once (0: none)', (s) => s.limits.concurrency?.limit ?? 0),
    gauge('global_concurrency_running', 'Slices holding a globalConcurrency place now', (s) => s.limits.concurrency?.running ?? 0),
    gauge('global_limit_waiting_keys', 'Keys waiting for a globalConcurrency place', (s) => s.limits.waiting),
    gauge(
      'global_limit_waited_seconds',
      'Time keys spent waiting for a batcher-wide limit, summed since the batcher began',
      (s) => s.limits.waitedMs / 1000,
    ),
  ];

  const unsubscribe = batchers.map((b) => {
    const batcher = b.name;
    const onPushed = ({ count }: { count: number }) => pushed.inc({ batcher }, count);
    const onDone = ({ ids, durationMs, waitedMs }: { ids: readonly string[]; durationMs: number; waitedMs?: number }) => {
      processed.inc({ batcher }, ids.length);
      sliceSeconds.observe({ batcher }, durationMs / 1000);
      if (options.latency !== false && waitedMs !== undefined) latency.observe({ batcher }, (waitedMs + durationMs) / 1000);
    };
    const onFailed = ({
      ids,
      durationMs,
      outcome,
      dead: died,
      acked,
    }: {
      ids: readonly string[];
      durationMs: number;
      outcome: string;
      dead: readonly string[];
      acked?: number;
    }) => {
      // Per id, by its fate: a failure may dead-letter some ids and retry the others.
      if (died.length > 0) failed.inc({ batcher, outcome: 'dead' }, died.length);
      if (ids.length > died.length) failed.inc({ batcher, outcome: outcome === 'dead' ? 'retry' : outcome }, ids.length - died.length);
      // A slice that acked some ids (ctx.fail) was timed by its slice:done.
      if (!acked) sliceSeconds.observe({ batcher }, durationMs / 1000);
    };
    const onDead = ({ ids }: { ids: readonly string[] }) => dead.inc({ batcher }, ids.length);
    b.on('pushed', onPushed).on('slice:done', onDone).on('slice:failed', onFailed).on('dead', onDead);
    return () => b.off('pushed', onPushed).off('slice:done', onDone).off('slice:failed', onFailed).off('dead', onDead);
  });

  return {
    registry,
    close() {
      for (const off of unsubscribe) off();
      for (const metric of [pushed, processed, failed, dead, sliceSeconds, latency, ...gauges])
        registry.removeSingleMetric((metric as unknown as { name: string }).name);
    },
  };
}
