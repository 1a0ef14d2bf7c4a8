// Builds the published package: CommonJS + .d.ts from tsc, plus a thin ESM entry over it.
// Node built-ins only, so the build needs nothing beyond the dev dependencies already installed.
import { spawnSync } from 'node:child_process';
import { copyFileSync, existsSync, mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join, relative } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const require = createRequire(import.meta.url);
const src = join(root, 'src');
const cjs = join(root, 'dist', 'cjs');
const esm = join(root, 'dist', 'esm');

// Start clean: stale files from renamed or deleted modules would otherwise ship.
rmSync(join(root, 'dist'), { recursive: true, force: true });

// Run the project's own tsc through this node (no npx, no shell), so the version is the locked one.
const tsc = spawnSync(process.execPath, [require.resolve('typescript/bin/tsc'), '-p', 'tsconfig.build.json'], {
  cwd: root,
  stdio: 'inherit',
});
if (tsc.status !== 0) process.exit(tsc.status ?? 1);

// tsc only emits .ts; src/storage/scripts/index.ts reads the .lua files at runtime from beside
// itself (join(__dirname, file)), includes/ too, so they must land at the same relative paths.
const scripts = join('storage', 'scripts');
for (const file of readdirSync(join(src, scripts), { recursive: true })) {
  if (!file.endsWith('.lua')) continue;
  const to = join(cjs, scripts, file);
  mkdirSync(dirname(to), { recursive: true });
  copyFileSync(join(src, scripts, file), to);
}

// ESM entry = the CJS module re-exported, not a second compile: one module instance means
// one set of classes, so `instanceof InvalidIdsError` holds whether a caller imports or requires.
// Names are listed explicitly (Node's CJS named-export detection is heuristic) and sorted for a stable file.
// `nestjs/index` is the `batch-by-key/nestjs` subpath; requiring it here also proves it loads
// (Nest 12 is ESM-only: our CommonJS requires it, which Node >= 20.19 allows).
const entries = ['index', 'nestjs/index'];
const counts = [];
for (const entry of entries) {
  const names = Object.keys(require(join(cjs, `${entry}.js`)))
    .filter((n) => n !== '__esModule')
    .sort();
  const up = '../'.repeat(entry.split('/').length);
  mkdirSync(dirname(join(esm, entry)), { recursive: true });
  writeFileSync(
    join(esm, `${entry}.mjs`),
    `import cjs from '${up}cjs/${entry}.js';\n\nexport const {\n${names.map((n) => `  ${n},\n`).join('')}} = cjs;\n`,
  );
  writeFileSync(join(esm, `${entry}.d.mts`), `export * from '${up}cjs/${entry}.js';\n`);
  // The ESM file is generated text: load it once, so a wrong path fails the build, not a user.
  const loaded = await import(pathToFileURL(join(esm, `${entry}.mjs`)).href);
  if (Object.keys(loaded).length !== names.length) {
    console.error(`build: dist/esm/${entry}.mjs exports ${Object.keys(loaded).length} names, the CommonJS entry ${names.length}`);
    process.exit(1);
  }
  counts.push(`${entry}: ${names.length}`);
}

// The public .d.ts files an app's type check reads (skipLibCheck: false reads them all) may import
// only what an app has installed. Not 'redlock': src/core/redlock.d.ts is an ambient module for our
// own build (redlock's types are ESM-only and do not resolve for a CommonJS importer), and tsc does
// not ship it. Not an optional peer (package.json's peerDependenciesMeta), which an app may lack,
// except where the entry is that peer's own (`batch-by-key/nestjs` needs @nestjs/*). Refuse to build
// if one does; a type that needs one stays in a module no public declaration reaches.
const pkg = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8'));
const optionalPeers = Object.keys(pkg.peerDependenciesMeta ?? {}).filter((name) => pkg.peerDependenciesMeta[name].optional);
const specifiers = (file) => [...readFileSync(file, 'utf8').matchAll(/(?:\bfrom\s+|\bimport\()'([^']+)'/g)].map(([, spec]) => spec);
const reachableFrom = (entry) => {
  const reachable = new Set();
  const visit = (file) => {
    if (reachable.has(file) || !existsSync(file)) return;
    reachable.add(file);
    for (const spec of specifiers(file).filter((s) => s.startsWith('.'))) {
      const base = join(dirname(file), spec.replace(/\.js$/, ''));
      visit(existsSync(`${base}.d.ts`) ? `${base}.d.ts` : join(base, 'index.d.ts'));
    }
  };
  visit(join(cjs, `${entry}.d.ts`));
  return reachable;
};
const leaks = [];
for (const entry of entries) {
  const own = entry === 'nestjs/index' ? (name) => name.startsWith('@nestjs/') : () => false;
  const refused = ['redlock', ...optionalPeers.filter((name) => !own(name))];
  for (const file of reachableFrom(entry)) {
    for (const spec of specifiers(file)) {
      if (refused.some((name) => spec === name || spec.startsWith(`${name}/`))) leaks.push(`${relative(cjs, file)} imports '${spec}'`);
    }
  }
}
if (leaks.length > 0) {
  console.error(`build: public types import what an app may not have installed: ${[...new Set(leaks)].join(', ')}`);
  process.exit(1);
}

console.log(`build: dist/cjs + dist/esm (exports of ${counts.join(', ')})`);
