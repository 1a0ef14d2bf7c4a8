import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { join } from 'node:path';

const CLI = join(__dirname, '..', '..', 'src', 'cli.ts');

/** What a CLI run printed, and its exit code. */
export interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** Starts the CLI from source under tsx, as `npx batch-by-key` would run the build (REDIS_URL unset). */
export function spawnCli(args: string[], env: Record<string, string> = {}): ChildProcessWithoutNullStreams {
  return spawn(process.execPath, ['--import', 'tsx', CLI, ...args], { env: { ...process.env, REDIS_URL: '', ...env } });
}

/** Runs the CLI to its end with `input` on its standard input. */
export function cli(args: string[], { input, env = {} }: { input?: string; env?: Record<string, string> } = {}): Promise<Run> {
  const child = spawnCli(args, env);
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
  child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
  child.stdin.end(input ?? '');
  return new Promise((resolve) => child.on('close', (code) => resolve({ code, stdout, stderr })));
}
