import { createHash } from 'node:crypto';
import { readdirSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import * as bullmqScripts from 'bullmq/dist/esm/scripts/index.js';
import { Redis } from 'ioredis';
import Redlock from 'redlock';
import { defineScripts, scriptLibrary } from '../../src/storage/scripts';
import { RAW_SCRIPTS } from '../systems/raw';

const sha1 = (text: string) => createHash('sha1').update(text).digest('hex');

let names: Map<string, string> | undefined;

/**
 * Names every Lua script the compared systems run, by SHA1 (what EVALSHA carries), and ours by
 * their function's name too (what FCALL carries, on Redis 7+), so a SLOWLOG of a run can say
 * "bbk claim" instead of a hash.
 */
export function scriptNames(): Map<string, string> {
  if (names) return names;
  names = new Map();
  for (const script of Object.values(bullmqScripts)) names.set(sha1(script.content), `bullmq ${script.name}`);

  const groupmqLua = join(dirname(createRequire(__filename).resolve('groupmq')), 'lua');
  for (const file of readdirSync(groupmqLua).filter((f) => f.endsWith('.lua'))) {
    names.set(sha1(readFileSync(join(groupmqLua, file), 'utf8')), `groupmq ${file.replace(/\.lua$/, '')}`);
  }

  // Our scripts are assembled from includes at load time; ioredis hashes what defineScripts registers
  // (its types say only `{}` of scriptsSet; each entry is a Script, with its sha).
  const probe = new Redis({ lazyConnect: true });
  defineScripts(probe);
  for (const [command, script] of Object.entries<{ sha: string }>(probe.scriptsSet)) {
    names.set(script.sha, `bbk ${command.replace(/^bbk_[\d_]+?_(?=[a-z])/, '').replace(/_/g, '-')}`);
  }
  for (const [script, fn] of scriptLibrary().functions) names.set(fn, `bbk ${script}`);
  // src/redlock.d.ts declares only what the library uses; `scripts` is public in redlock itself.
  const redlock = new Redlock([probe]) as unknown as { scripts: Record<string, { hash: string }> };
  for (const [name, script] of Object.entries(redlock.scripts)) names.set(script.hash, `redlock ${name.replace(/Script$/, '')}`);
  probe.disconnect();

  for (const [name, lua] of Object.entries(RAW_SCRIPTS)) names.set(sha1(lua), `raw ${name}`);
  return names;
}
