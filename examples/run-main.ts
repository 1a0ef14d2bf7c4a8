import { spawn } from 'node:child_process';
import { pathToFileURL } from 'node:url';
import { RedisNotInstalledError, startRedis } from '../tools/redis-server';

/**
 * Runs a one-shot example's `main` when its file is run directly (`npx tsx examples/bulk-import.ts`),
 * and does nothing when the file is imported (the examples test imports them).
 *
 * With REDIS_URL set, `main` runs against that Redis. Without it, a throwaway redis-server from
 * your PATH is started, as `npm run demo` does, and the file runs again in a child process with
 * REDIS_URL pointing at it (the example's batcher reads REDIS_URL when its module loads); the
 * server is stopped, and its data dropped, when the child exits.
 */
export function runMain(moduleUrl: string, main: () => Promise<unknown>): void {
  const file = process.argv[1];
  if (!file || moduleUrl !== pathToFileURL(file).href) return;
  if (process.env.REDIS_URL) {
    main().catch((err: unknown) => {
      console.error(err);
      process.exit(1);
    });
    return;
  }
  inThrowawayRedis(file).then(
    (code) => process.exit(code),
    (err: unknown) => {
      console.error(err);
      process.exit(1);
    },
  );
}

async function inThrowawayRedis(file: string): Promise<number> {
  let redis;
  try {
    redis = await startRedis();
  } catch (err) {
    if (!(err instanceof RedisNotInstalledError)) throw err;
    console.error(err.message);
    return 1;
  }
  console.error(`REDIS_URL is not set: running against a throwaway redis-server at ${redis.url}`);
  // Ctrl-C reaches the child too; this process waits for it to finish, then stops the server.
  const ignore = () => {};
  process.on('SIGINT', ignore);
  try {
    const child = spawn(process.execPath, [...process.execArgv, file, ...process.argv.slice(2)], {
      stdio: 'inherit',
      env: { ...process.env, REDIS_URL: redis.url },
    });
    return await new Promise<number>((resolve, reject) => {
      child.once('error', reject);
      child.once('exit', (code) => resolve(code ?? 1));
    });
  } finally {
    process.off('SIGINT', ignore);
    await redis.stop();
  }
}
