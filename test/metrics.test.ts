import { Registry } from 'prom-client';
import { describe, expect, it } from 'vitest';
import { InvalidOptionError, MissingDependencyError, PermanentError, prometheusMetrics } from '../src';
import { loadOptional, requireOptional } from '../src/core/optional';
import { redisNow } from '../src/ops/stats';
import { range, redisClient, testBatcher, waitFor } from './helpers/redis';

/** The samples of a Prometheus text exposition: `name{labels}` → value. */
function parse(text: string): Map<string, number> {
  const samples = new Map<string, number>();
  for (const line of text.split('\n')) {
    if (line === '' || line.startsWith('#')) continue;
    const match = /^([a-zA-Z_:][a-zA-Z0-9_:]*(?:\{[^}]*\})?) (\S+)$/.exec(line);
    if (!match) throw new Error(`not a Prometheus sample line: ${line}`);
    samples.set(match[1]!, Number(match[2]));
  }
  return samples;
}

describe('prometheusMetrics', () => {
  it('a slice whose handler failed some ids (ctx.fail): the others count as processed, the failed as failed, the slice timed once', async () => {
    const registry = new Registry();
    const b = testBatcher({
      attempts: 1,
      eachIteration: (ids, ctx) => ctx.fail('2', new Error('row 2')),
    });
    prometheusMetrics([b], { registry, prefix: 'bbk_' });
    await b.performBatchLater(range(4), { key: 'a' });
    b.createWorker();
    const label = `{batcher="${b.name}"}`;
    // Both events of the slice are emitted once its one call stands.
    const samples = await waitFor(
      async () => {
        const now = parse(await registry.metrics());
        return now.get(`bbk_ids_processed_total${label}`) === 3 && now.get(`bbk_ids_dead_lettered_total${label}`) === 1 ? now : undefined;
      },
      { what: 'the slice counted' },
    );
    expect(samples.get(`bbk_ids_failed_total{batcher="${b.name}",outcome="dead"}`)).toBe(1);
    expect(samples.get(`bbk_ids_dead_lettered_total${label}`)).toBe(1);
    expect(samples.get(`bbk_slice_duration_seconds_count${label}`)).toBe(1);
    expect(samples.get(`bbk_push_to_processed_seconds_count${label}`)).toBe(1);
  });

  it('counts each failed id by its fate: a ctx.fail slice that dead-letters one id and retries another', async () => {
    const registry = new Registry();
    const b = testBatcher({
      attempts: 3,
      backoff: { type: 'fixed', delayMs: 60_000 },
      eachIteration(ids, ctx) {
        if (ids.includes('0')) ctx.fail('0', new PermanentError('bad row'));
        if (ids.includes('1')) ctx.fail('1', new Error('try again'));
      },
    });
    prometheusMetrics([b], { registry, prefix: 'bbk_' });
    await b.performBatchLater(range(3), { key: 'a' });
    b.createWorker();
    const samples = await waitFor(async () => {
      const now = parse(await registry.metrics());
      return now.get(`bbk_ids_processed_total{batcher="${b.name}"}`) === 1 ? now : undefined;
    });
    expect(samples.get(`bbk_ids_failed_total{batcher="${b.name}",outcome="dead"}`)).toBe(1);
    expect(samples.get(`bbk_ids_failed_total{batcher="${b.name}",outcome="retry"}`)).toBe(1);
  });

  it('counts pushed, processed, failed and dead ids, times slices and push-to-processed latency, reads gauges from stats()', async () => {
    const registry = new Registry();
    const b = testBatcher({
      sliceSize: 2,
      attempts: 1,
      isolateFailures: false,
      eachIteration: (ids, ctx) => {
        if (ctx.key === 'bad') throw new PermanentError('no');
      },
    });
    const metrics = prometheusMetrics([b], { registry, prefix: 'bbk_' });
    // The Redis clock (the one lag is read by) around the first push and around the reading.
    const clock = redisClient();
    const pushedFrom = await redisNow(clock);
    await b.performBatchLater(range(5), { key: 'a' });
    const pushedBy = await redisNow(clock);
    await b.performBatchLater(['x'], { key: 'bad' });
    const label = `{batcher="${b.name}"}`;

    const readFrom = await redisNow(clock);
    let samples = parse(await registry.metrics());
    const readBy = await redisNow(clock);
    expect(samples.get(`bbk_ids_pushed_total${label}`)).toBe(6);
    expect(samples.get(`bbk_pending_ids${label}`)).toBe(6);
    expect(samples.get(`bbk_keys${label}`)).toBe(2);
    // The age of the oldest pending id, the first push's, in seconds.
    const lagMs = samples.get(`bbk_lag_seconds${label}`)! * 1000;
    expect(lagMs).toBeGreaterThanOrEqual(readFrom - pushedBy);
    expect(lagMs).toBeLessThanOrEqual(readBy - pushedFrom);

    b.createWorker();
    await waitFor(
      async () => {
        const now = parse(await registry.metrics());
        return now.get(`bbk_push_to_processed_seconds_count${label}`) === 3 && now.get(`bbk_ids_dead_lettered_total${label}`) === 1;
      },
      { what: 'three slices timed and one dead' },
    );
    samples = parse(await registry.metrics());
    expect(samples.get(`bbk_ids_processed_total${label}`)).toBe(5);
    expect(samples.get(`bbk_ids_failed_total{batcher="${b.name}",outcome="dead"}`)).toBe(1);
    expect(samples.get(`bbk_ids_dead_lettered_total${label}`)).toBe(1);
    expect(samples.get(`bbk_slice_duration_seconds_count${label}`)).toBe(4);
    expect(samples.get(`bbk_push_to_processed_seconds_bucket{le="+Inf",batcher="${b.name}"}`)).toBe(3);
    await waitFor(async () => parse(await registry.metrics()).get(`bbk_pending_ids${label}`) === 0 || undefined, {
      what: 'gauges to drop',
    });
    const end = parse(await registry.metrics());
    expect([end.get(`bbk_in_flight_ids${label}`), end.get(`bbk_lag_seconds${label}`), end.get(`bbk_dead_letters${label}`)]).toEqual([
      0, 0, 1,
    ]);

    metrics.close();
    expect(await registry.metrics()).not.toContain('bbk_');
    await b.performBatchLater(['late'], { key: 'a' });
    expect(await registry.metrics()).toBe('\n');
  });

  it('shows the batcher-wide limits, their use and the time keys waited for them', async () => {
    const registry = new Registry();
    const b = testBatcher({
      sliceSize: 2,
      globalConcurrency: 1,
      globalRateLimit: { max: 100, durationMs: 60_000 },
      eachIteration: () => {},
    });
    const metrics = prometheusMetrics([b], { registry, prefix: 'bbk_' });
    const label = `{batcher="${b.name}"}`;
    await Promise.all(range(4).map((k) => b.performBatchLater(['1', '2'], { key: `k${k}` })));
    b.createWorker({ concurrency: 4 });
    await waitFor(async () => (await b.stats()).pending === 0 && (await b.stats()).inFlight === 0, { what: 'every id' });
    const samples = parse(await registry.metrics());
    expect(samples.get(`bbk_global_concurrency_limit${label}`)).toBe(1);
    expect(samples.get(`bbk_global_concurrency_running${label}`)).toBe(0);
    expect(samples.get(`bbk_global_rate_limit_ids${label}`)).toBe(100);
    expect(samples.get(`bbk_global_rate_limit_window_seconds${label}`)).toBe(60);
    expect(samples.get(`bbk_global_rate_limit_used_ids${label}`)).toBe(8);
    expect(samples.get(`bbk_global_limit_waiting_keys${label}`)).toBe(0);
    // Four keys for one place: some waited.
    expect(samples.get(`bbk_global_limit_waited_seconds${label}`)).toBeGreaterThan(0);
    metrics.close();
  });

  it('uses the default registry and prefix, and rejects bad options', async () => {
    const { register } = await import('prom-client');
    const b = testBatcher({ eachIteration: () => {} });
    const metrics = prometheusMetrics([b]);
    try {
      expect(metrics.registry).toBe(register);
      expect(await register.metrics()).toContain(`batch_by_key_pending_ids{batcher="${b.name}"} 0`);
    } finally {
      metrics.close();
    }
    expect(() => prometheusMetrics([])).toThrow(InvalidOptionError);
    expect(() => prometheusMetrics([b], { prefix: 'bad prefix' })).toThrow(InvalidOptionError);
  });

  it('a missing optional dependency is a MissingDependencyError that says what to install', () => {
    expect(loadOptional('batch-by-key-not-installed')).toBeUndefined();
    expect(() => requireOptional('batch-by-key-not-installed', 'prometheusMetrics')).toThrow(MissingDependencyError);
    expect(() => requireOptional('batch-by-key-not-installed', 'prometheusMetrics')).toThrow('npm install batch-by-key-not-installed');
  });
});
