import type { InjectionToken, ModuleMetadata, OptionalFactoryDependency } from '@nestjs/common';
import type { BatchByKeyOptions, Connection } from '../core/types';
import { optionNames } from '../core/validate';

/** What `BatchByKeyModule.forRoot` takes: the Redis every registered batcher uses. */
export interface BatchByKeyRootOptions {
  /**
   * A `redis://` URL, ioredis options, or an ioredis `Redis`/`Cluster` client the application
   * already has. A client stays the application's to close; with a URL or options each batcher
   * opens its own connections and closes them when the application shuts down.
   */
  connection: Connection;
  /** BullMQ's key prefix for every registered batcher that sets none itself. @default as `batchByKey` ('bull', or 'bull:{name}' on a Cluster) */
  prefix?: string;
}

/** @internal Every name `BatchByKeyRootOptions` has (the compiler holds the list to the type). */
export const ROOT_OPTION_NAMES = optionNames<BatchByKeyRootOptions>()(['connection', 'prefix']);

/** `BatchByKeyModule.forRootAsync`: the root options from a factory, with Nest's dependency injection. */
export interface BatchByKeyRootAsyncOptions {
  /** Modules whose exported providers `inject` names (a config module, the module that provides the app's Redis client). */
  imports?: ModuleMetadata['imports'];
  /** Providers passed to `useFactory`, in order. */
  inject?: Array<InjectionToken | OptionalFactoryDependency>;
  // never[]: a factory with any parameters fits; Nest passes the `inject` providers in order.
  useFactory: (...args: never[]) => BatchByKeyRootOptions | Promise<BatchByKeyRootOptions>;
}

/**
 * One batcher of `BatchByKeyModule.registerBatcher`: the options of `batchByKey` but the
 * connection (from `forRoot`) and the handler (a `@BatchProcessor` class, if the application has one).
 */
export type RegisterBatcherOptions = Omit<BatchByKeyOptions, 'connection' | 'eachIteration'>;

/**
 * One batcher of `BatchByKeyModule.registerBatcherAsync`: its name, and its other options from a
 * factory with Nest's dependency injection, so that functions such as `weight`, `rateLimit`,
 * `onTicketSettled` and `around` can use the application's services.
 */
export interface RegisterBatcherAsyncOptions {
  /** The batcher's name, known when the module is defined: `@InjectBatcher(name)` and `@BatchProcessor(name)` use it. */
  name: string;
  /** Modules whose exported providers `inject` names. */
  imports?: ModuleMetadata['imports'];
  /** Providers passed to `useFactory`, in order. */
  inject?: Array<InjectionToken | OptionalFactoryDependency>;
  // never[]: a factory with any parameters fits; Nest passes the `inject` providers in order.
  /** The rest of `registerBatcher`'s options (no `name`), checked as `registerBatcher` checks them. */
  useFactory: (...args: never[]) => Omit<RegisterBatcherOptions, 'name'> | Promise<Omit<RegisterBatcherOptions, 'name'>>;
}

/** @internal Every name `RegisterBatcherAsyncOptions` has (the compiler holds the list to the type). */
export const REGISTER_ASYNC_OPTION_NAMES = optionNames<RegisterBatcherAsyncOptions>()(['name', 'imports', 'inject', 'useFactory']);
