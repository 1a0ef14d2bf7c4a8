// The published package as an application meets it: packs the tarball and installs it into a
// fresh app twice, beside the oldest and beside the newest BullMQ of its peer range (package.json's
// peerDependencies.bullmq), without the optional peers (@opentelemetry/api, prom-client, @nestjs/*).
// Each app must hold exactly one copy of bullmq, the one asked for: a second copy (ours nested
// under batch-by-key) would be a second Queue class and a second set of scripts beside the app's.
// Each app type-checks a file of ordinary use, as ESM and as CommonJS, and the README's quick start
// (examples/quickstart.mts, which test/examples.test.ts holds to the README), with
// `skipLibCheck: false`, then runs the quick start against a throwaway redis-server.
// A declaration that imports what the app lacks, or a BullMQ of the range that the package does
// not work with, fails here rather than in a user's build.
// Needs the npm registry (bullmq, ioredis, @types/node) and redis-server on PATH; when the registry
// fails, npm's cache is tried (--prefer-offline, --offline).
// Usage: node tools/check-package-types.mjs [--keep] (--keep leaves the temp apps for a look)
import { spawnSync } from 'node:child_process';
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { dirname, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import semver from 'semver';
import { tsImport } from 'tsx/esm/api';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const require = createRequire(import.meta.url);
const keep = process.argv.includes('--keep');
const work = mkdtempSync(join(tmpdir(), 'batch-by-key-types-'));
const { startRedis } = await tsImport('./redis-server.ts', import.meta.url);

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
  console.error(`check-package-types: ${message}${keep ? ` (the apps are in ${work})` : ''}`);
  if (!keep) rmSync(work, { recursive: true, force: true });
  process.exit(1);
}

/** Every copy of a package under an app's node_modules, nested ones too: their directories. */
function copiesOf(name, dir) {
  const modules = join(dir, 'node_modules');
  if (!existsSync(modules)) return [];
  const found = [];
  for (const entry of readdirSync(modules)) {
    const packages = entry.startsWith('@') ? readdirSync(join(modules, entry)).map((inner) => join(entry, inner)) : [entry];
    for (const pkg of packages) {
      const at = join(modules, pkg);
      if (pkg === name && existsSync(join(at, 'package.json'))) found.push(at);
      found.push(...copiesOf(name, at));
    }
  }
  return found;
}

const range = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')).peerDependencies.bullmq;
const oldest = semver.minVersion(range).version;
/** The newest release npm has in the range; from npm's cache when the registry does not answer. */
function newestOf(range) {
  for (const mode of [[], ['--offline']]) {
    const result = spawnSync('npm', ['view', `bullmq@${range}`, 'version', '--json', ...mode], { encoding: 'utf8' });
    if (result.status !== 0) continue;
    const versions = [JSON.parse(result.stdout)].flat();
    return semver.maxSatisfying(versions, range);
  }
  return fail(`npm view bullmq@${range} failed, from the registry and from npm's cache`);
}
const newest = newestOf(range);

// The build, then the pack without its prepack (which would build again, onto npm's --json output):
// the tarball holds what `npm publish` would upload.
run(process.execPath, [join(root, 'tools', 'build.mjs')], root);
const [{ filename }] = JSON.parse(run('npm', ['pack', '--json', '--ignore-scripts', '--pack-destination', work], root));
const tarball = join(work, filename);

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

/** A fresh app with batch-by-key and the given BullMQ, type-checked, its quick start run. */
async function checkApp(bullmq) {
  const app = join(work, `app-bullmq-${bullmq}`);
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
  writeFileSync(join(app, 'esm.mts'), use(`import { ${names} } from 'batch-by-key';`));
  writeFileSync(join(app, 'cjs.cts'), use(`import { ${names} } from 'batch-by-key';`));
  copyFileSync(join(root, 'examples', 'quickstart.mts'), join(app, 'quickstart.mts'));

  // No install scripts: a type check needs no native build (msgpackr-extract's, see docs/deploying.md).
  const install = ['install', tarball, `bullmq@${bullmq}`, '@types/node@20', '--no-audit', '--no-fund', '--ignore-scripts'];
  const installed = spawnSync('npm', install, { cwd: app, stdio: 'inherit' });
  if (installed.status !== 0) {
    console.log("check-package-types: npm install failed; trying again from npm's cache (--prefer-offline)");
    run('npm', [...install, '--prefer-offline'], app);
  }
  const present = ['@opentelemetry/api', 'prom-client', '@nestjs/common', '@nestjs/core'].filter((peer) =>
    existsSync(join(app, 'node_modules', peer)),
  );
  if (present.length > 0) fail(`the app has optional peers installed, so the check proves nothing: ${present.join(', ')}`);
  const copies = copiesOf('bullmq', app).map(
    (dir) => `${relative(app, dir)} (${JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8')).version})`,
  );
  if (copies.length !== 1 || copies[0] !== `${join('node_modules', 'bullmq')} (${bullmq})`) {
    fail(`the app beside bullmq@${bullmq} should hold that one copy of bullmq, and holds: ${copies.join(', ') || 'none'}`);
  }

  // The project's own TypeScript (the app installs none): the version the package is built with.
  run(process.execPath, [require.resolve('typescript/bin/tsc'), '-p', app], app);

  // `npx tsx quickstart.mts`, as the README says, with the project's tsx (the app installs none);
  // from the app, so `batch-by-key` is the installed tarball.
  const redis = await startRedis().catch((error) => fail(error.message));
  const quickstart = spawnSync(process.execPath, [require.resolve('tsx/cli'), 'quickstart.mts'], {
    cwd: app,
    env: { ...process.env, REDIS_URL: redis.url },
    stdio: ['ignore', 'pipe', 'inherit'],
    encoding: 'utf8',
    timeout: 60_000,
  });
  await redis.stop();
  process.stdout.write(quickstart.stdout ?? '');
  if (quickstart.status !== 0 || !/done: 3,\s*failed: 0/.test(quickstart.stdout)) {
    fail(`the quick start beside bullmq@${bullmq} exited with ${quickstart.status ?? quickstart.signal}, without its 3 ids done`);
  }
  console.log(`check-package-types: beside bullmq@${bullmq} (one copy), ${filename} type-checks and runs the quick start`);
}

const versions = [...new Set([oldest, newest])];
for (const bullmq of versions) await checkApp(bullmq);
console.log(
  `check-package-types: ${filename} type-checks in a fresh app (ESM and CommonJS, skipLibCheck: false, no optional peers) ` +
    `and runs the quick start, beside the oldest and the newest bullmq of ${range}: ${versions.join(', ')}`,
);
if (!keep) rmSync(work, { recursive: true, force: true });
