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

/**
 * Commands clients send that scripts never run: blocking waits, transactions, connection and
 * admin commands (BullMQ's BZPOPMIN, MULTI/EXEC, INFO, CLIENT SETNAME, PING...). Every other line
 * of INFO commandstats but the script calls counts as run by scripts (see `scriptSplit`).
 */
export const CLIENT_ONLY: ReadonlySet<string> = new Set([
  'bzpopmin',
  'bzpopmax',
  'bzmpop',
  'blpop',
  'brpop',
  'blmpop',
  'blmove',
  'brpoplpush',
  'multi',
  'exec',
  'discard',
  'watch',
  'unwatch',
  'info',
  'client',
  'ping',
  'hello',
  'auth',
  'select',
  'quit',
  'readonly',
  'command',
  'script',
  'config',
  'slowlog',
]);

/**
 * The script calls of some INFO commandstats and the commands they ran. In Redis 7 INFO counts a
 * command a script runs on that command's own line, and in the script call's usec too: so `luaUsec`,
 * the script calls' usec less their commands', is what the scripts cost beyond their commands (Lua
 * itself, the calls into Redis and back, setting up each call). The commands scripts ran are every
 * line but the script calls and CLIENT_ONLY; a command a client sent directly that a script could
 * also run (a startup's HSET, say, or one queued in a MULTI) counts as a script's.
 */
export interface ScriptSplit {
  scriptCalls: number;
  /** EVAL/EVALSHA/FCALL usec: each script call with the commands it ran. */
  scriptUsec: number;
  innerCalls: number;
  innerUsec: number;
  luaUsec: number;
  /** Calls of CLIENT_ONLY commands: left out of both. */
  clientOnlyCalls: number;
}

const baseName = (command: string) => command.split('|')[0]!;

export function scriptSplit(stats: readonly CommandStat[]): ScriptSplit {
  const sum = (filter: (s: CommandStat) => boolean, field: 'calls' | 'usec') => stats.filter(filter).reduce((n, s) => n + s[field], 0);
  const isScript = (s: CommandStat) => SCRIPTS.has(s.command);
  const isClientOnly = (s: CommandStat) => CLIENT_ONLY.has(baseName(s.command));
  const isInner = (s: CommandStat) => !isScript(s) && !isClientOnly(s);
  const scriptUsec = sum(isScript, 'usec');
  const innerUsec = sum(isInner, 'usec');
  return {
    scriptCalls: sum(isScript, 'calls'),
    scriptUsec,
    innerCalls: sum(isInner, 'calls'),
    innerUsec,
    luaUsec: scriptUsec - innerUsec,
    clientOnlyCalls: sum(isClientOnly, 'calls'),
  };
}
