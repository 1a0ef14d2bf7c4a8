import { describe, expect, it } from 'vitest';
import { currentKey, InvalidKeyError, withKey } from '../src';
import { sleep } from './helpers/time';

describe('withKey / currentKey', () => {
  it('carries the key through awaits and nested calls, and restores the outer one', async () => {
    expect(currentKey()).toBeUndefined();
    await withKey('outer', async () => {
      await sleep(1);
      expect(currentKey()).toBe('outer');
      withKey('inner', () => expect(currentKey()).toBe('inner'));
      expect(currentKey()).toBe('outer');
    });
    expect(currentKey()).toBeUndefined();
  });

  it('refuses an invalid key', () => {
    expect(() => withKey('', () => 1)).toThrow(InvalidKeyError);
  });
});
