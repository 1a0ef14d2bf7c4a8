import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';

const ROOT = join(__dirname, '..');
const npm = (...args: string[]) => spawnSync('npm', args, { cwd: ROOT, encoding: 'utf8', timeout: 60_000 });

/** npm 11's review of dependencies' install scripts (older npm has no such command and runs them all). */
const reviewsScripts = npm('install-scripts', '--help').status === 0;

describe('a clean install', () => {
  it('decides every install script of the dependencies in package.json (allowScripts)', () => {
    const pkg = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { allowScripts?: Record<string, boolean> };
    // esbuild's links its own prebuilt binary; msgpackr-extract's builds from source what its optional package ships.
    expect(pkg.allowScripts).toEqual({ esbuild: true, 'msgpackr-extract': false });
  });

  it.skipIf(!reviewsScripts)('leaves no install script unreviewed, so `npm install` prints no warning', () => {
    const ls = npm('install-scripts', 'ls');
    expect(ls.status).toBe(0);
    expect(ls.stdout + ls.stderr).toMatch(/No packages with unreviewed install scripts/);
  });

  it("keeps msgpackr's native extension, BullMQ's faster path, without its install script", async () => {
    const msgpackr = (await import('msgpackr')) as { isNativeAccelerationEnabled?: boolean };
    expect(msgpackr.isNativeAccelerationEnabled).toBe(true);
  });
});
