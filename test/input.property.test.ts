import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { batchByKey, InvalidIdsError, InvalidKeyError, InvalidOptionError, MAX_TIMER_MS, RateLimitedError } from '../src';
import { MAX_ERROR_TEXT } from '../src/engine/failures';
import { wellFormedText } from '../src/core/text';
import { MAX_ID_LENGTH, MAX_KEY_LENGTH } from '../src/core/input';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { dashboard } from '../src';
import { keyspaceOf, redisClient, testBatcher, testConnection, waitFor } from './helpers/redis';

/**
 * The input surface, by property: every valid key and id list round-trips through Redis as given,
 * and every invalid one throws the documented typed error with nothing written for its key.
 */

/** Strings of any UTF-16 code units, lone surrogates and the characters a key name uses (`{`, `}`, `:`) included. */
const unit = fc.oneof(
  fc.constantFrom('{', '}', ':', '%', ' ', '\u0000'),
  fc.string({ unit: 'grapheme', minLength: 1, maxLength: 1 }),
  fc.integer({ min: 0, max: 0xffff }).map((code) => String.fromCharCode(code)),
);
const anyString = (maxLength: number) => fc.string({ unit, minLength: 1, maxLength });
const wellFormed = (maxLength: number) => anyString(maxLength).filter((s) => s.length <= maxLength && s.isWellFormed());
const loneSurrogate = fc
  .tuple(wellFormed(8), fc.integer({ min: 0xd800, max: 0xdfff }), wellFormed(8))
  .map(([a, unit, b]) => `${a}${String.fromCharCode(unit)}${b}`);
const validId = fc.oneof(wellFormed(40), fc.double({ noNaN: true, noDefaultInfinity: true }), fc.integer());
const invalidId = fc.oneof(
  fc.constant(''),
  loneSurrogate,
  fc.constant('x'.repeat(MAX_ID_LENGTH + 1)),
  fc.constantFrom(Number.NaN, Number.POSITIVE_INFINITY, Number.NEGATIVE_INFINITY, null, undefined, true, {}, [], Symbol('id')),
);
const invalidKey = fc.oneof(
  fc.constant(''),
  loneSurrogate,
  fc.constant('k'.repeat(MAX_KEY_LENGTH + 1)),
  fc.constantFrom(null, 42, {}, ['k']),
);

/** Nothing of the key in Redis: no pending structure, no lag mark, no index entry. */
async function nothingWritten(b: ReturnType<typeof testBatcher>, key: string): Promise<boolean> {
  const redis = redisClient();
  const names = keyspaceOf(b).forKey(key);
  const [exists, indexed] = await Promise.all([
    redis.exists(names.pending, names.pushMarks, names.tracked),
    redis.zscore(keyspaceOf(b).index, key),
  ]);
  return exists === 0 && indexed === null;
}

describe('the input surface, by property (fast-check)', () => {
  it('any valid key and ids round-trip through Redis as given (numbers as their string), in push order', async () => {
    const b = testBatcher({ eachIteration: () => {} });
    const redis = redisClient();
    await fc.assert(
      fc.asyncProperty(wellFormed(60), fc.array(validId, { minLength: 1, maxLength: 20 }), async (key, ids) => {
        const names = keyspaceOf(b).forKey(key);
        await redis.del(names.pending, names.pushMarks);
        const { pushed } = await b.performBatchLater(ids, { key });
        expect(pushed).toBe(ids.length);
        expect(await redis.lrange(names.pending, 0, -1)).toEqual(ids.map(String));
      }),
      { numRuns: 60 },
    );
  });

  it('any list with an invalid id throws InvalidIdsError and writes nothing', async () => {
    const b = testBatcher({ eachIteration: () => {} });
    await fc.assert(
      fc.asyncProperty(
        fc.array(validId, { maxLength: 5 }),
        invalidId,
        fc.array(validId, { maxLength: 5 }),
        fc.uuid(),
        async (before, bad, after, key) => {
          await expect(b.performBatchLater([...before, bad, ...after] as never, { key })).rejects.toThrow(InvalidIdsError);
          expect(await nothingWritten(b, key)).toBe(true);
        },
      ),
      { numRuns: 60 },
    );
  });

  it('any invalid key throws InvalidKeyError and writes nothing', async () => {
    const b = testBatcher({ eachIteration: () => {} });
    await fc.assert(
      fc.asyncProperty(invalidKey, async (key) => {
        await expect(b.performBatchLater(['1'], { key: key as never })).rejects.toThrow(InvalidKeyError);
        // (A key with a lone surrogate has no Redis names at all.)
        if (typeof key === 'string' && key.length > 0 && key.isWellFormed()) expect(await nothingWritten(b, key)).toBe(true);
      }),
      { numRuns: 40 },
    );
  });

  it('every timer option takes an integer in [its minimum, MAX_TIMER_MS] and refuses anything else with InvalidOptionError', () => {
    const minimum = { maxRuntimeMs: 1, sliceTimeoutMs: 1, lockTtlMs: 1000, recoveryIntervalMs: 100, pushTimeoutMs: 1 } as const;
    const make = (option: string, value: unknown) => () =>
      batchByKey({ name: 'props', connection: testConnection(), eachIteration: () => {}, [option]: value });
    for (const [option, min] of Object.entries(minimum)) {
      fc.assert(fc.property(fc.integer({ min, max: MAX_TIMER_MS }), (value) => void make(option, value)()));
      const invalid = fc.oneof(
        fc.integer({ min: Number.MIN_SAFE_INTEGER, max: min - 1 }),
        fc.integer({ min: MAX_TIMER_MS + 1, max: Number.MAX_SAFE_INTEGER }),
        fc.double({ min, max: MAX_TIMER_MS, noInteger: true, noNaN: true }),
        fc.constantFrom(Number.NaN, Number.POSITIVE_INFINITY, '100', null, {}),
      );
      fc.assert(
        fc.property(invalid, (value) => {
          expect(make(option, value)).toThrow(InvalidOptionError);
        }),
      );
    }
  });

  it('a rateLimit is { max, durationMs } with integers in [1, MAX_TIMER_MS]; anything else is refused with InvalidOptionError', () => {
    const make = (rateLimit: unknown) => () =>
      batchByKey({ name: 'props', connection: testConnection(), eachIteration: () => {}, rateLimit: rateLimit as never });
    const valid = fc.integer({ min: 1, max: MAX_TIMER_MS });
    fc.assert(fc.property(valid, valid, (max, durationMs) => void make({ max, durationMs })()));
    const invalidNumber = fc.oneof(
      fc.integer({ min: Number.MIN_SAFE_INTEGER, max: 0 }),
      fc.integer({ min: MAX_TIMER_MS + 1, max: Number.MAX_SAFE_INTEGER }),
      fc.double({ min: 1, max: 1000, noInteger: true, noNaN: true }),
      fc.constantFrom(Number.NaN, Number.POSITIVE_INFINITY, '10', null, undefined),
    );
    fc.assert(
      fc.property(
        fc.oneof(
          fc.tuple(invalidNumber, valid).map(([max, durationMs]) => ({ max, durationMs })),
          fc.tuple(valid, invalidNumber).map(([max, durationMs]) => ({ max, durationMs })),
          fc.constantFrom(null, 10, 'fast', [], true),
        ),
        (limit) => {
          expect(make(limit)).toThrow(InvalidOptionError);
        },
      ),
    );
  });

  it('a retryAfter takes any ms in [0, MAX_TIMER_MS] (fractions round up) and refuses anything else with InvalidOptionError', () => {
    fc.assert(
      fc.property(fc.double({ min: 0, max: MAX_TIMER_MS, noNaN: true }), (ms) => {
        expect(new RateLimitedError({ retryAfterMs: ms }).retryAfterMs).toBe(Math.ceil(ms));
      }),
    );
    const invalid = fc.oneof(
      fc.double({ max: -Number.MIN_VALUE, noNaN: true }),
      fc.double({ min: MAX_TIMER_MS + 1, noNaN: true }),
      fc.constantFrom(Number.NaN, '100', null, undefined),
    );
    fc.assert(
      fc.property(invalid, (ms) => {
        expect(() => new RateLimitedError({ retryAfterMs: ms as number })).toThrow(InvalidOptionError);
      }),
    );
  });

  it('any JSON data pushed with an id reaches the handler as JSON gives it back', async () => {
    const seen = new Map<string, unknown>();
    const b = testBatcher({ sliceSize: 50, eachIteration: (ids, ctx) => ids.forEach((id) => seen.set(id, ctx.data(id))) });
    b.createWorker();
    await fc.assert(
      fc.asyncProperty(fc.array(fc.jsonValue({ maxDepth: 3 }), { minLength: 1, maxLength: 20 }), async (values) => {
        seen.clear();
        const key = `data-${Math.random()}`;
        await b.performBatchLater(
          values.map((data, i) => ({ id: `i${i}`, data })),
          { key },
        );
        await waitFor(() => seen.size === values.length, { what: 'every id' });
        values.forEach((data, i) => expect(seen.get(`i${i}`)).toEqual(JSON.parse(JSON.stringify(data)) as unknown));
      }),
      { numRuns: 15 },
    );
  });

  it('any error text (lone surrogates, any length) is dead-lettered well-formed and capped, as wellFormedText gives it', async () => {
    const texts = fc.sample(fc.oneof(anyString(40), loneSurrogate, anyString(3000)), { numRuns: 40, seed: 42 });
    const b = testBatcher({
      sliceSize: 1,
      attempts: 1,
      eachIteration: (ids) => {
        throw new Error(texts[Number(ids[0])]);
      },
    });
    b.createWorker();
    await b.performBatchLater(
      texts.map((_, i) => String(i)),
      { key: 'errors' },
    );
    await waitFor(async () => (await b.deadLetters.count()) === texts.length, { what: 'every letter' });
    const { letters } = await b.deadLetters.list({ limit: 1000 });
    for (const letter of letters) {
      const message = letter.error.message;
      expect(message.isWellFormed()).toBe(true);
      expect(message).toBe(wellFormedText(texts[Number(letter.id)]!, MAX_ERROR_TEXT.message));
    }
  });

  it('any key string round-trips through the dashboard’s forms: pause and resume act on exactly that key', async () => {
    const b = testBatcher({ eachIteration: () => {} });
    const handler = dashboard({ batchers: [b], readOnly: false });
    const server = createServer(handler);
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    try {
      const token = /name="token" value="([0-9a-f]+)"/.exec(await (await fetch(`${url}/`)).text())![1]!;
      const act = (action: 'pause' | 'resume', key: string) =>
        fetch(`${url}/actions/${action}`, {
          method: 'POST',
          headers: { 'content-type': 'application/x-www-form-urlencoded' },
          body: new URLSearchParams({ batcher: b.name, token, key64: Buffer.from(key, 'utf8').toString('base64url') }),
        });
      await fc.assert(
        fc.asyncProperty(fc.oneof(wellFormed(60), fc.constantFrom('a\nb', 'a\r\nb', 'nul\u0000', ' lead', '%61')), async (key) => {
          expect((await act('pause', key)).status).toBe(200);
          expect((await b.paused()).map((p) => p.key)).toEqual([key]);
          expect((await act('resume', key)).status).toBe(200);
          expect(await b.paused()).toEqual([]);
        }),
        { numRuns: 40 },
      );
    } finally {
      server.close();
    }
  });
});
