import { Writable } from 'node:stream';
import pino from 'pino';
import { describe, expect, it } from 'vitest';
import { pinoLogger, type Logger } from '../src';
import { incidentLogger } from '../src/core/logger';
import { redisFailureKind } from '../src/core/redis-errors';
import { testBatcher, waitFor } from './helpers/redis';

/** A worker whose one slice fails once (a warning) and then succeeds. */
async function failOnce(logger: Logger): Promise<void> {
  const b = testBatcher({
    logger,
    backoff: { type: 'fixed', delayMs: 1 },
    attempts: 2,
    eachIteration: (_ids, ctx) => {
      if (ctx.attempt === 1) throw new Error('flaky');
    },
  });
  await b.performBatchLater(['1'], { key: 'acct' });
  b.createWorker();
}

describe('logger', () => {
  it('pinoLogger passes pino its (obj, msg) order, so the metadata is kept', async () => {
    const lines: Record<string, unknown>[] = [];
    const stream = new Writable({
      write(chunk: Buffer, _encoding, done) {
        lines.push(JSON.parse(chunk.toString()) as Record<string, unknown>);
        done();
      },
    });
    await failOnce(pinoLogger(pino({ level: 'debug' }, stream)));
    const line = await waitFor(() => lines.find((l) => l.msg === 'batch-by-key: slice failed'), { what: 'the failure logged' });
    expect(line).toMatchObject({ level: 40, key: 'acct', ids: 1, attempt: 1, outcome: 'retry', err: { message: 'flaky', type: 'Error' } });
  });

  it('is quiet by default and takes console as it is', async () => {
    const calls: unknown[][] = [];
    const consoleLike = { warn: (...args: unknown[]) => calls.push(args) };
    await failOnce(consoleLike);
    await waitFor(() => calls.length > 0, { what: 'a warning' });
    expect(calls[0]).toEqual(['batch-by-key: slice failed', expect.objectContaining({ key: 'acct', outcome: 'retry' })]);
  });

  it('logs ids the handler reported with ctx.fail as one info line per slice, with no stack (a slice that threw warns, above)', async () => {
    const lines: { level: keyof Logger; message: string; meta: Record<string, unknown> | undefined }[] = [];
    const capture = (level: keyof Logger) => (message: string, meta?: Record<string, unknown>) => void lines.push({ level, message, meta });
    const b = testBatcher({
      logger: { debug: capture('debug'), info: capture('info'), warn: capture('warn'), error: capture('error') },
      attempts: 1,
      sliceSize: 100,
      eachIteration: (ids, ctx) => {
        for (const id of ids) if (Number(id) % 10 === 3) ctx.fail(id, new Error(`row ${id} failed validation`));
      },
    });
    await b.performBatchLater(
      Array.from({ length: 300 }, (_, i) => i),
      { key: 'import' },
    );
    b.createWorker({ concurrency: 1 });
    await waitFor(async () => (await b.deadLetters.count()) === 30 && (await b.backlog('import')).inFlight === 0, {
      what: 'the reported ids dead-lettered',
    });

    // A slice's line follows its fenced failure call, which the dead letters show first.
    await waitFor(() => lines.filter((l) => l.level !== 'debug').length >= 3, { what: "the last slice's line" });
    const failures = lines.filter((l) => l.level !== 'debug');
    expect(failures).toHaveLength(3);
    for (const line of failures) {
      expect(line).toMatchObject({
        level: 'info',
        message: 'batch-by-key: ids reported failed',
        meta: { key: 'import', ids: 10, acked: 90 },
      });
      expect(line.meta!.error).toMatch(/^row \d*3 failed validation$/);
      expect(JSON.stringify(line.meta)).not.toMatch(/\bat .*:\d+:\d+/);
      expect(line.meta).not.toHaveProperty('err');
    }
  });

  it('logs a Redis failure once per kind per interval, then its repeats in one line with their count; anything else every time', async () => {
    const lines: [string, Record<string, unknown>][] = [];
    const logger = incidentLogger(
      { warn: (m, meta = {}) => void lines.push([m, meta]), error: (m, meta = {}) => void lines.push([m, meta]) },
      200,
    );
    const refusal = (message: string) => Object.assign(new Error(message), { name: 'ReplyError' });
    for (let i = 0; i < 500; i++)
      logger.warn?.('fetch failed', { err: refusal("OOM command not allowed when used memory > 'maxmemory'.") });
    logger.warn?.('fetch failed', { err: refusal('BUSY Redis is busy running a script.') });
    logger.error?.('fetch failed', { err: refusal("OOM command not allowed when used memory > 'maxmemory'.") });
    logger.warn?.('fetch failed', { err: Object.assign(new Error('connect ECONNREFUSED'), { code: 'ECONNREFUSED' }) });
    logger.warn?.('fetch failed', { err: Object.assign(new Error('connect ECONNREFUSED'), { code: 'ECONNREFUSED' }) });
    for (let i = 0; i < 3; i++) logger.warn?.('slice failed', { err: new Error('flaky') });
    // The first of each kind at once (OOM warn, BUSY warn, OOM error, connection), a handler's errors each time.
    expect(lines.map(([m, meta]) => `${m} ${String((meta.err as Error).message).split(' ')[0]}`)).toEqual([
      'fetch failed OOM',
      'fetch failed BUSY',
      'fetch failed OOM',
      'fetch failed connect',
      'slice failed flaky',
      'slice failed flaky',
      'slice failed flaky',
    ]);
    // At the interval's end: one line per kind that repeated, with the count.
    await waitFor(() => lines.length >= 9, { what: 'the counts' });
    const counted = lines.slice(7);
    expect(counted.map(([m, meta]) => [m, redisFailureKind(meta.err), meta.repeated])).toEqual([
      ['fetch failed', 'OOM', 499],
      ['fetch failed', 'connection', 1],
    ]);
    expect(counted[0]?.[1].withinMs).toBe(200);
  });
});
