import { Writable } from 'node:stream';
import pino from 'pino';
import { describe, expect, it } from 'vitest';
import { pinoLogger, type Logger } from '../src';
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
});
