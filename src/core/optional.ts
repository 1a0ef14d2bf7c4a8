import { MissingDependencyError } from './errors';

/**
 * Loads an optional peer dependency on first use, so those who never ask for metrics or traces
 * need not install it. Resolved from this package, as the app's own copy is (one instance).
 */
export function loadOptional<T>(name: string): T | undefined {
  try {
    // A CommonJS require on purpose: loaded lazily, and only when present.
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    return require(name) as T;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'MODULE_NOT_FOUND' && String((err as Error).message).includes(name)) return undefined;
    throw err;
  }
}

export function requireOptional<T>(name: string, feature: string): T {
  const loaded = loadOptional<T>(name);
  if (loaded === undefined) throw new MissingDependencyError(`${feature} needs the optional dependency ${name}: npm install ${name}`);
  return loaded;
}
