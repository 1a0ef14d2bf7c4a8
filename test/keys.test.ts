import { describe, expect, it } from 'vitest';
import { keyspaceOf, keysMatching, onCluster, Recorder, redisClient, testBatcher, waitFor } from './helpers/redis';
import { encodeKey, KEY_SUFFIXES, Keyspace, laneNames } from '../src/storage/keys';
import { keyspaceInclude } from '../src/storage/scripts';

const WEIRD_KEYS = [
  'a',
  'a:',
  ':a',
  '{a}',
  'a}{b',
  '}',
  'line\nbreak',
  'tab\tand space',
  'ключ-🙂-鍵',
  '%61', // would collide with 'a' under a careless decode
  'x'.repeat(300),
  'bbk:keys', // looks like one of our own key names
  'it\'s (*)!~ "q" \\ \u0001', // encodeURIComponent's unreserved marks, and what JSON escapes
];

describe('keys', () => {
  it('any key string works and never collides with another', async () => {
    const rec = new Recorder();
    const b = testBatcher({ eachIteration: rec.handler });
    for (const [i, key] of WEIRD_KEYS.entries()) {
      await b.performBatchLater([`id-${i}-0`, `id-${i}-1`], { key });
    }
    b.createWorker({ concurrency: 4 });
    await waitFor(() => rec.all.length === WEIRD_KEYS.length * 2);
    for (const [i, key] of WEIRD_KEYS.entries()) {
      expect(rec.idsOf(key)).toEqual([`id-${i}-0`, `id-${i}-1`]);
    }
  });

  it('all Redis keys of one logical key share one hash tag, distinct per logical key', async () => {
    const b = testBatcher({ eachIteration: () => {}, sliceSize: 1 });
    for (const key of WEIRD_KEYS) await b.performBatchLater(['1', '2'], { key });
    const redisKeys = await keysMatching(`${keyspaceOf(b).root}:{*`);
    const tagOf = (k: string) => k.slice(k.indexOf('{') + 1, k.indexOf('}'));
    const tags = new Set(redisKeys.map(tagOf));
    expect(tags.size).toBe(WEIRD_KEYS.length);
    for (const tag of tags) {
      expect(tag).not.toMatch(/[{}:]/);
      expect(WEIRD_KEYS).toContain(decodeURIComponent(tag));
    }
  });
});

describe('prefix', () => {
  it('a hash-tagged BullMQ prefix does not become the hash tag of our keys', async () => {
    const b = testBatcher({ prefix: '{app}', eachIteration: () => {} });
    await b.performBatchLater(['1'], { key: 'acct' });
    const ours = await keysMatching(`app:${b.name}:bbk:*`);
    expect(ours).toContain(`app:${b.name}:bbk:{acct}:pending`);
    expect(await keysMatching(`{app}:${b.name}:*`)).not.toHaveLength(0); // the BullMQ queue
  });

  // A Cluster refuses a prefix without a hash tag (test/validation.test.ts).
  it.skipIf(onCluster())('puts our keys and the BullMQ queue under the given prefix', async () => {
    const rec = new Recorder();
    const b = testBatcher({ prefix: 'myapp', eachIteration: rec.handler });
    await b.performBatchLater(['1'], { key: 'k' });
    const keys = await keysMatching(`*${b.name}*`);
    expect(keys.length).toBeGreaterThan(0);
    expect(keys.every((k) => k.startsWith(`myapp:${b.name}:`))).toBe(true);
    expect(keys).toContain(`myapp:${b.name}:bbk:{k}:pending`);
    b.createWorker();
    await waitFor(() => rec.all.length === 1);
  });
});

describe('key names in TypeScript and in Lua', () => {
  it('every name of a key is its base and its suffix, and the claim scripts derive the same names, lane by lane', async () => {
    const keyspace = new Keyspace('bull', 'q');
    const redis = redisClient();
    for (const key of WEIRD_KEYS) {
      const names = keyspace.forKey(key);
      expect(Object.keys(names).sort()).toEqual(['base', ...Object.keys(KEY_SUFFIXES)].sort());
      for (const [field, suffix] of Object.entries(KEY_SUFFIXES))
        expect(names[field as keyof typeof KEY_SUFFIXES]).toBe(names.base + suffix);
      for (const lane of [0, 3]) {
        // The base from the root and the encoded key, as a fetch builds it from a job's deduplication id.
        const flat = (await redis.eval(
          `${keyspaceInclude()}\nlocal names = keyNames(keyBase(ARGV[1], ARGV[2]), tonumber(ARGV[3]))\n` +
            // Names are built as they are read (see keyspaceInclude): read every one.
            "local out = {'base', names.base}\nfor field in pairs(KEY_SUFFIXES) do out[#out + 1] = field; out[#out + 1] = names[field] end\nreturn out",
          1,
          names.base,
          keyspace.root,
          encodeKey(key),
          lane,
        )) as string[];
        const fromLua: Record<string, string> = {};
        for (let i = 0; i < flat.length; i += 2) fromLua[flat[i]!] = flat[i + 1]!;
        expect(fromLua).toEqual({ ...laneNames(names, lane) });
      }
    }
  });

  it('Lua encodes a key as encodeKey does (a fetch builds its key job’s names from the key in its data)', async () => {
    const redis = redisClient();
    for (const key of WEIRD_KEYS) {
      // As includes/fused-claim.lua reads the key from a key job's data.
      expect(await redis.eval(`${keyspaceInclude()}\nreturn encodeKey(cjson.decode(ARGV[1]).key)`, 0, JSON.stringify({ key }))).toBe(
        encodeKey(key),
      );
    }
  });

  it('a script that reads a name keys.ts does not define fails loudly instead of using nil', async () => {
    await expect(redisClient().eval(`${keyspaceInclude()}\nreturn keyNames('q:{k}', 0).pendng`, 0)).rejects.toThrow(/no key name pendng/);
  });
});
