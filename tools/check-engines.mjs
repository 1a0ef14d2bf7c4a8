// `node tools/check-engines.mjs` (part of `npm run lint`, so CI): a clean `npm install` must hold
// on every Node version package.json's `engines.node` claims. Each package in package-lock.json
// that would be installed on Linux x64 with glibc must accept every version the claim covers
// (its own `engines.node` must contain ours); otherwise npm warns EBADENGINE on some claimed
// version, as it did when a NestJS 12 dev dependency pulled in a package that needs Node 22.
// Packages for other platforms are skipped, as npm skips them there; a claim that is too wide
// for one of them would show on that platform only.
import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import semver from 'semver';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const read = (file) => JSON.parse(readFileSync(join(root, file), 'utf8'));
const claim = read('package.json').engines?.node;
if (!claim || !semver.validRange(claim)) {
  console.error(`package.json: engines.node must be a semver range, got ${JSON.stringify(claim)}`);
  process.exit(1);
}

const fits = (list, value) => !list || list.includes(value) || list.every((entry) => entry.startsWith('!') && entry !== `!${value}`);
const narrower = [];
for (const [path, entry] of Object.entries(read('package-lock.json').packages)) {
  if (path === '' || !fits(entry.os, 'linux') || !fits(entry.cpu, 'x64') || !fits(entry.libc, 'glibc')) continue;
  const theirs = entry.engines?.node;
  if (typeof theirs !== 'string' || !semver.validRange(theirs)) continue;
  if (!semver.subset(claim, theirs)) narrower.push(`${path.replace(/^.*node_modules\//, '')}@${entry.version} needs node ${theirs}`);
}

if (narrower.length > 0) {
  console.error(
    `engines.node claims ${claim}, but a clean install warns EBADENGINE on part of it:\n  ${narrower.join('\n  ')}\n` +
      'Narrow the claim, or pin these packages (or what pulls them in) to versions that accept it.',
  );
  process.exit(1);
}
console.log(`engines: every locked package accepts node ${claim}`);
