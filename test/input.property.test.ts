import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { batchByKey, InvalidIdsError, InvalidKeyError, InvalidOptionError, MAX_TIMER_MS } from '../src';
import { MAX_ID_LENGTH, MAX_KEY_LENGTH } from '../src/core/input';
import { keyspaceOf, redisClient, testBatcher, testConnection } from './helpers/redis';

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
});
