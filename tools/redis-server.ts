import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/** A throwaway redis-server for tests, the demo and the bench; none of its data is kept. */
export interface LocalRedis {
  url: string;
  port: number;
  stop(): Promise<void>;
}

const INSTALL_HINT = [
  'redis-server was not found on PATH. Install it, or set REDIS_URL to a Redis you run:',
  '  Debian/Ubuntu: sudo apt-get install -y redis-server',
  '  macOS:         brew install redis',
].join('\n');

export class RedisNotInstalledError extends Error {
  constructor() {
    super(INSTALL_HINT);
    this.name = 'RedisNotInstalledError';
  }
}

export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.unref();
    server.on('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      server.close(() => (typeof address === 'object' && address ? resolve(address.port) : reject(new Error('no port'))));
    });
  });
}

function hasRedisServer(): boolean {
  return spawnSync('redis-server', ['--version'], { stdio: 'ignore' }).status === 0;
}

async function waitForReady(child: ChildProcess, port: number): Promise<void> {
  await new Promise<void>((resolve, reject) => {
    let output = '';
    const onData = (chunk: Buffer) => {
      output += chunk.toString();
      if (output.includes('Ready to accept connections')) {
        child.stdout?.off('data', onData);
        resolve();
      }
    };
    child.stdout?.on('data', onData);
    child.once('exit', (code) => reject(new Error(`redis-server on port ${port} exited with ${code}:\n${output}`)));
  });
}

/** Starts redis-server on a loopback port (a free one unless given), without persistence. */
export async function startRedis(extraArgs: string[] = [], port?: number): Promise<LocalRedis> {
  if (!hasRedisServer()) throw new RedisNotInstalledError();
  port ??= await freePort();
  const dir = mkdtempSync(join(tmpdir(), 'bbk-redis-'));
  const child = spawn(
    'redis-server',
    ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--dir', dir, ...extraArgs],
    { stdio: ['ignore', 'pipe', 'inherit'] },
  );
  await waitForReady(child, port);
  child.stdout?.resume();
  return {
    url: `redis://127.0.0.1:${port}`,
    port,
    stop: async () => {
      // A server killed by a signal (a test's SIGKILL) has a signalCode and no exitCode.
      if (child.exitCode === null && child.signalCode === null) {
        const exited = new Promise((resolve) => child.once('exit', resolve));
        child.kill('SIGTERM');
        await exited;
      }
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
