import { describe, InvalidOptionError } from './errors';
import { MAX_TIMER_MS } from './limits';

/**
 * The checks every option, argument and query of the library goes through, so a bad value gets
 * the same kind of message wherever it is given: what it is (`where`), what was expected, and
 * what came (`got …`). Each throws an InvalidOptionError before anything reaches Redis.
 */

export { MAX_TIMER_MS };

/**
 * `Array.isArray` that keeps a readonly array's element type: the built-in narrows a
 * `readonly T[]` to `any[]` (TypeScript issue 17002), which would untype every use after the check.
 */
export function isArray(value: unknown): value is readonly unknown[] {
  return Array.isArray(value);
}

function fail(where: string, expected: string, value: unknown): never {
  throw new InvalidOptionError(`${where} must be ${expected}, got ${describe(value)}`);
}

/** An integer in [min, max]; `fallback` when undefined. */
export function integer(where: string, value: unknown, fallback: number, min: number, max: number = Number.MAX_SAFE_INTEGER): number {
  return value === undefined ? fallback : requiredInteger(where, value, min, max);
}

/** An integer in [min, max], with no default: undefined is refused as any other value is (an argument, not an option). */
export function requiredInteger(where: string, value: unknown, min: number, max: number = Number.MAX_SAFE_INTEGER): number {
  if (typeof value !== 'number' || !Number.isInteger(value) || value < min || value > max) {
    fail(where, `an integer ${max === Number.MAX_SAFE_INTEGER ? `>= ${min}` : `between ${min} and ${max}`}`, value);
  }
  return value;
}

/** Whole milliseconds in [min, MAX_TIMER_MS]; `fallback` when undefined. */
export function duration(where: string, value: unknown, fallback: number, min = 1): number {
  return integer(where, value, fallback, min, MAX_TIMER_MS);
}

/** A number of ms > 0 and at most MAX_TIMER_MS (fractions allowed: a poll interval, say); `fallback` when undefined. */
export function positiveMs(where: string, value: unknown, fallback: number): number {
  if (value === undefined) return fallback;
  if (typeof value !== 'number' || !Number.isFinite(value) || value <= 0 || value > MAX_TIMER_MS) {
    fail(where, `a number > 0 and <= ${MAX_TIMER_MS} (Node's longest timer)`, value);
  }
  return value;
}

/** One of `allowed`; `fallback` when undefined. */
export function oneOf<T extends string>(where: string, value: unknown, allowed: readonly T[], fallback: T): T {
  if (value === undefined) return fallback;
  if (!allowed.includes(value as T)) fail(where, `one of ${allowed.map((a) => `'${a}'`).join(', ')}`, value);
  return value as T;
}

/** A boolean; `fallback` when undefined. */
export function boolean(where: string, value: unknown, fallback: boolean): boolean {
  if (value === undefined) return fallback;
  if (typeof value !== 'boolean') fail(where, 'a boolean', value);
  return value;
}

/** A function (of the given shape, told in `shape`), or undefined. */
export function optionalFunction<F>(where: string, value: unknown, shape: string): F | undefined {
  if (value !== undefined && typeof value !== 'function') fail(where, `a function ${shape}`, value);
  return value as F | undefined;
}

/**
 * A per-key option's value for `key`: the value given (checked when the batcher was defined), or
 * what its function returns for `key`, checked by `check` under the call's name
 * (`options.maxWaitMs("acct-7")`), so a bad result names the key it came for.
 */
export function perKey<T>(
  where: string,
  option: NoInfer<T> | ((key: string) => unknown),
  key: string,
  check: (where: string, value: unknown) => T,
): T {
  return typeof option === 'function' ? check(`${where}(${JSON.stringify(key)})`, (option as (key: string) => unknown)(key)) : option;
}

/**
 * The names of an options type, checked by the compiler against the type itself: a name missing
 * from the list (or one the type does not have) is a type error, so the list cannot drift.
 */
export function optionNames<T>() {
  return <const L extends readonly (keyof T & string)[]>(
    names: L & ([Exclude<keyof T, L[number]>] extends [never] ? unknown : { missing: Exclude<keyof T, L[number]> }),
  ): L => names;
}

/**
 * Refuses an option of `given` that is not in `known` (a typo such as `maxRuntimMs` would
 * otherwise run with the default, silently, for JavaScript users and options read from a config
 * file), naming the closest known option.
 */
export function onlyKnownOptions(where: string, given: object, known: readonly string[]): void {
  for (const name of Object.keys(given)) {
    if (known.includes(name)) continue;
    const closest = closestName(name, known);
    throw new InvalidOptionError(
      `${where}: unknown option ${JSON.stringify(name)}${closest ? `; did you mean ${closest}?` : ''} (known: ${known.join(', ')})`,
    );
  }
}

/** The known name nearest to `name` by edit distance (case-blind), if it is near enough to be a typo. */
function closestName(name: string, known: readonly string[]): string | undefined {
  let best: string | undefined;
  let bestDistance = Math.max(2, Math.floor(name.length / 3)) + 1;
  for (const candidate of known) {
    const distance = editDistance(name.toLowerCase(), candidate.toLowerCase());
    if (distance < bestDistance) [best, bestDistance] = [candidate, distance];
  }
  return best;
}

function editDistance(a: string, b: string): number {
  let previous = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const current = [i];
    for (let j = 1; j <= b.length; j++) {
      current[j] = Math.min(previous[j]! + 1, current[j - 1]! + 1, previous[j - 1]! + (a[i - 1] === b[j - 1] ? 0 : 1));
    }
    previous = current;
  }
  return previous[b.length]!;
}
