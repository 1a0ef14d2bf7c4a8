import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { VERSION } from '../src/core/version';

describe('VERSION', () => {
  it('matches package.json (it names the Redis scripts per version)', () => {
    const pkg = JSON.parse(readFileSync(new URL('../package.json', `file://${__filename}`), 'utf8')) as { version: string };
    expect(VERSION).toBe(pkg.version);
  });
});
