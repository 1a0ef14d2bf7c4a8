// redlock 5.0.0-beta.2 ships CommonJS code but types that TypeScript reads as ESM-only
// ("type": "module"), which a CommonJS build cannot import. This declares the part we use,
// matching node_modules/redlock/dist/index.d.ts.
declare module 'redlock' {
  import { EventEmitter } from 'node:events';
  import type { Cluster, Redis } from 'ioredis';

  export interface Settings {
    readonly driftFactor: number;
    readonly retryCount: number;
    readonly retryDelay: number;
    readonly retryJitter: number;
    readonly automaticExtensionThreshold: number;
  }

  export class Lock {
    constructor(redlock: Redlock, resources: string[], value: string, attempts: unknown[], expiration: number);
    readonly redlock: Redlock;
    readonly resources: string[];
    readonly value: string;
    expiration: number;
    release(): Promise<unknown>;
    extend(duration: number): Promise<Lock>;
  }

  export class ExecutionError extends Error {}
  export class ResourceLockedError extends Error {}

  export default class Redlock extends EventEmitter {
    constructor(
      clients: Iterable<Redis | Cluster>,
      settings?: Partial<Settings>,
      scripts?: {
        readonly acquireScript?: string | ((script: string) => string);
        readonly extendScript?: string | ((script: string) => string);
        readonly releaseScript?: string | ((script: string) => string);
      },
    );
    acquire(resources: string[], duration: number, settings?: Partial<Settings>): Promise<Lock>;
    release(lock: Lock, settings?: Partial<Settings>): Promise<unknown>;
    extend(existing: Lock, duration: number, settings?: Partial<Settings>): Promise<Lock>;
    quit(): Promise<void>;
  }
}
