import { readFileSync } from 'node:fs';
import { cpus, platform, release, totalmem } from 'node:os';
import { join } from 'node:path';
import { withFreshRedis } from './redis';

const ROOT = join(__dirname, '..', '..');

/** Reads the installed version from node_modules (some packages do not export ./package.json). */
function installed(name: string): string {
  try {
    return (JSON.parse(readFileSync(join(ROOT, 'node_modules', name, 'package.json'), 'utf8')) as { version: string }).version;
  } catch {
    return 'not installed';
  }
}

export interface Machine {
  cpu: string;
  cores: number;
  memoryGb: number;
  os: string;
  node: string;
  redis: string;
  redisSource: string;
  packages: Record<string, string>;
}

export async function machineInfo(): Promise<Machine> {
  const own = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { name: string; version: string };
  return {
    cpu: cpus()[0]?.model.trim() ?? 'unknown',
    cores: cpus().length,
    memoryGb: Math.round(totalmem() / 2 ** 30),
    os: `${platform()} ${release()}`,
    node: process.version,
    redis: await withFreshRedis((redis) => redis.version()),
    redisSource: process.env.REDIS_URL ? 'REDIS_URL' : 'throwaway redis-server per measurement',
    packages: {
      [own.name]: own.version,
      ...Object.fromEntries(['bullmq', 'ioredis', 'redlock', 'groupmq', 'tsx'].map((name) => [name, installed(name)])),
    },
  };
}
