import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { inlineIncludes, scriptSource, type ScriptName } from '../../src/storage/scripts';

const SCRIPTS_DIR = join(__dirname, '..', '..', 'src', 'storage', 'scripts');

/** What the prelude variant runs where the script's own body would begin. */
export const PRELUDE_RETURN = 'do return 0 end\n';

/**
 * Where a script file's own body begins: the first line after its header comment (`--[[ ... ]]`)
 * and its top-level includes that is neither blank nor a comment. Includes inside the body (in a
 * function, as fetch-and-claim.lua's claim) are the body's.
 */
export function bodyStart(file: string): number {
  let at = 0;
  if (file.startsWith('--[[')) {
    const close = file.indexOf(']]');
    if (close < 0) throw new Error('unclosed header comment');
    at = file.indexOf('\n', close) + 1;
  }
  while (at < file.length) {
    const end = file.indexOf('\n', at);
    const line = file.slice(at, end < 0 ? file.length : end).trim();
    if (line !== '' && !line.startsWith('--')) return at;
    at = end < 0 ? file.length : end + 1;
  }
  throw new Error('no body');
}

/**
 * The script as its command runs it, returning 0 right before its first statement of work: what
 * every call pays before any of it (Redis setting up the call's KEYS and ARGV, and the top-level
 * code of its includes: their functions and tables, built on every call). Built from the loaded
 * source: the file's head (header and top-level includes) inlined as loading inlines it is where
 * the loaded source's body begins.
 */
export function preludeSource(name: ScriptName): string {
  const file = readFileSync(join(SCRIPTS_DIR, `${name}.lua`), 'utf8');
  const head = inlineIncludes(file.slice(0, bodyStart(file)));
  const loaded = scriptSource(name);
  if (!loaded.startsWith(head)) throw new Error(`${name}.lua: its loaded source does not begin with its inlined head`);
  return loaded.slice(0, head.length) + PRELUDE_RETURN + loaded.slice(head.length);
}
