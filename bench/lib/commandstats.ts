import type { BenchRedis } from './redis';

/** One command's line of INFO commandstats ("evalsha", "config|resetstat", ...). */
export interface CommandStat {
  command: string;
  calls: number;
  usec: number;
}

/**
 * Script calls. Their usec includes that of the commands they run, which INFO also counts on those
 * commands' own lines; EXEC's usec likewise includes the commands queued in its MULTI.
 */
export const SCRIPTS: ReadonlySet<string> = new Set(['eval', 'evalsha', 'eval_ro', 'evalsha_ro', 'fcall', 'fcall_ro']);

/** What the bench's admin connection sends to read and reset the figures; never a system's. */
const BENCH_OWN = /^(info|config\|.*|slowlog\|.*)$/;

/** Zeroes INFO commandstats (and the other INFO counters). */
export async function resetCommandStats(redis: BenchRedis): Promise<void> {
  await redis.admin.config('RESETSTAT');
}

/** INFO commandstats since the last reset, the bench's own INFO/CONFIG calls left out. */
export async function readCommandStats(redis: BenchRedis): Promise<CommandStat[]> {
  const stats: CommandStat[] = [];
  for (const [field, value] of Object.entries(await redis.info('commandstats'))) {
    if (!field.startsWith('cmdstat_')) continue;
    const command = field.slice('cmdstat_'.length);
    if (BENCH_OWN.test(command)) continue;
    const fields = Object.fromEntries(value.split(',').map((kv) => kv.split('=') as [string, string]));
    stats.push({ command, calls: Number(fields.calls), usec: Number(fields.usec) });
  }
  return stats.sort((a, b) => b.usec - a.usec);
}
