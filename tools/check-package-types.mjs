// The published package as an application meets it: packs the tarball, installs it into a fresh
// app (without the optional peers: @opentelemetry/api, prom-client, @nestjs/*) and type-checks a
// file of ordinary use with `skipLibCheck: false`, as ESM and as CommonJS. A declaration that
// imports what the app lacks, or does not compile, fails here rather than in a user's build.
// Needs the npm registry (bullmq, ioredis, @types/node); when it fails, npm's cache is tried (--prefer-offline).
// Usage: node tools/check-package-types.mjs [--keep] (--keep leaves the temp app for a look)
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const require = createRequire(import.meta.url);
const keep = process.argv.includes('--keep');
const work = mkdtempSync(join(tmpdir(), 'batch-by-key-types-'));

/** Runs a command, its output shown; exits with its status when it fails. */
function run(command, args, cwd) {
  const result = spawnSync(command, args, { cwd, stdio: ['ignore', 'pipe', 'inherit'], encoding: 'utf8' });
  if (result.status !== 0) {
    process.stdout.write(result.stdout ?? '');
    fail(`${command} ${args.join(' ')} exited with ${result.status ?? result.signal}`);
  }
  return result.stdout;
}

function fail(message) {
  console.error(`check-package-types: ${message}${keep ? ` (the app is in ${work})` : ''}`);
  if (!keep) rmSync(work, { recursive: true, force: true });
  process.exit(1);
}

// The build, then the pack without its prepack (which would build again, onto npm's --json output):
// the tarball holds what `npm publish` would upload.
run(process.execPath, [join(root, 'tools', 'build.mjs')], root);
const [{ filename }] = JSON.parse(run('npm', ['pack', '--json', '--ignore-scripts', '--pack-destination', work], root));
const tarball = join(work, filename);

const app = join(work, 'app');
mkdirSync(app);
writeFileSync(join(app, 'package.json'), JSON.stringify({ name: 'app', version: '1.0.0', private: true }, null, 2));
writeFileSync(
  join(app, 'tsconfig.json'),
  JSON.stringify(
    {
      compilerOptions: {
        target: 'ES2022',
        module: 'nodenext',
        moduleResolution: 'nodenext',
        strict: true,
        skipLibCheck: false,
        noEmit: true,
        types: ['node'],
      },
      include: ['*.mts', '*.cts'],
    },
    null,
    2,
  ),
);
// What a first app does: a batcher, a tracked push, the events, the ops helpers whose peers are absent.
const use = (from) => `${from}

const Refresher = batchByKey({
  name: 'refresher',
  connection: 'redis://localhost:6379',
  around: [sliceTracing()],
  async eachIteration(ids: string[], ctx: IterationContext) {
    for (const id of ids) if (id === 'bad') ctx.fail(id, new PermanentError('bad id'));
  },
});
Refresher.on('dead', ({ ids, error }) => console.error(ids.length, error.message));
Refresher.on('slice:failed', ({ errors }) => errors?.forEach((error, id) => console.error(id, error.stack)));
export async function push(ids: string[]): Promise<Ticket> {
  const { ticket } = await Refresher.performBatchLater(ids, { key: 'acct-1', track: true });
  return ticket;
}
export const handlers = [dashboard({ batchers: [Refresher] }), prometheusMetrics];
`;
const names = 'batchByKey, dashboard, PermanentError, prometheusMetrics, sliceTracing, type IterationContext, type Ticket';
writeFileSync(join(app, 'esm.mts'), use(`import { ${names} } from 'batch-by-key';`));
writeFileSync(join(app, 'cjs.cts'), use(`import { ${names} } from 'batch-by-key';`));

// No install scripts: a type check needs no native build (msgpackr-extract's, see docs/deploying.md).
const install = ['install', tarball, '@types/node@20', '--no-audit', '--no-fund', '--ignore-scripts'];
const installed = spawnSync('npm', install, { cwd: app, stdio: 'inherit' });
if (installed.status !== 0) {
  console.log("check-package-types: npm install failed; trying again from npm's cache (--prefer-offline)");
  run('npm', [...install, '--prefer-offline'], app);
}
const present = ['@opentelemetry/api', 'prom-client', '@nestjs/common', '@nestjs/core'].filter((peer) =>
  existsSync(join(app, 'node_modules', peer)),
);
if (present.length > 0) fail(`the app has optional peers installed, so the check proves nothing: ${present.join(', ')}`);

// The project's own TypeScript (the app installs none): the version the package is built with.
run(process.execPath, [require.resolve('typescript/bin/tsc'), '-p', app], app);
console.log(`check-package-types: ${filename} type-checks in a fresh app (ESM and CommonJS, skipLibCheck: false, no optional peers)`);
if (!keep) rmSync(work, { recursive: true, force: true });
