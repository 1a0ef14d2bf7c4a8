import { Module, type DynamicModule, type FactoryProvider, type ModuleMetadata, type Provider } from '@nestjs/common';
import { DiscoveryModule } from '@nestjs/core';
import { describe, InvalidOptionError } from '../core/errors';
import { onlyKnownOptions, optionNames } from '../core/validate';
import { BATCH_BY_KEY_OPTIONS, resolveOptions } from '../options';
import { getBatcherToken } from './decorators';
import {
  REGISTER_ASYNC_OPTION_NAMES,
  ROOT_OPTION_NAMES,
  type BatchByKeyRootAsyncOptions,
  type BatchByKeyRootOptions,
  type RegisterBatcherAsyncOptions,
  type RegisterBatcherOptions,
} from './options';
import { BatchByKeyRegistry, ROOT_OPTIONS } from './registry';

/** Every name `BatchByKeyRootAsyncOptions` has (the compiler holds the list to the type). */
const ASYNC_OPTION_NAMES = optionNames<BatchByKeyRootAsyncOptions>()(['imports', 'inject', 'useFactory']);

function rootModule(options: Provider, imports: NonNullable<ModuleMetadata['imports']>): DynamicModule {
  return {
    module: BatchByKeyModule,
    // Global, as a database module is: every feature module's registerBatcher finds the registry.
    global: true,
    imports: [DiscoveryModule, ...imports],
    providers: [options, BatchByKeyRegistry],
    exports: [BatchByKeyRegistry],
  };
}

/** Checks a registration at module definition, so a typo fails at startup with the option's name, as `batchByKey` does. */
function validateRegistration(options: RegisterBatcherOptions): void {
  if (typeof options !== 'object' || options === null) {
    throw new InvalidOptionError(`BatchByKeyModule.registerBatcher takes options objects, got ${describe(options)}`);
  }
  for (const field of ['connection', 'eachIteration'] as const) {
    if (field in options) {
      const where =
        field === 'connection' ? 'BatchByKeyModule.forRoot({ connection })' : 'a @BatchProcessor class with an eachIteration method';
      throw new InvalidOptionError(
        `BatchByKeyModule.registerBatcher: ${field} comes from ${where}, not from the registration of '${String(options.name)}'`,
      );
    }
  }
  onlyKnownOptions(
    'BatchByKeyModule.registerBatcher options',
    options,
    BATCH_BY_KEY_OPTIONS.filter((name) => name !== 'connection' && name !== 'eachIteration'),
  );
  // The connection is not known yet (forRootAsync); an options object stands in for it. The
  // prefix's Cluster rule is checked again once the batcher is built with the real connection.
  resolveOptions({ ...options, connection: {} });
}

/** A registration's provider injects the registry optionally, to say that forRoot is missing rather than fail in Nest's words. */
const REGISTRY = { token: BatchByKeyRegistry, optional: true };

function registryOf(registry: BatchByKeyRegistry | undefined, name: string, how: string): BatchByKeyRegistry {
  if (!registry) {
    throw new InvalidOptionError(
      `BatchByKeyModule.${how}({ name: '${name}' }) needs BatchByKeyModule.forRoot() or forRootAsync() in the application's root module`,
    );
  }
  return registry;
}

/** Each name once per call: a second registration of one name in one call is a mistake, not a share. */
function uniqueNames(names: readonly unknown[], how: string): void {
  const seen = new Set<unknown>();
  for (const name of names) {
    if (seen.has(name)) throw new InvalidOptionError(`BatchByKeyModule.${how}: '${String(name)}' is given twice`);
    seen.add(name);
  }
}

/** Checks an async registration at module definition; its factory's options are checked when it answers. */
function validateAsyncRegistration(options: RegisterBatcherAsyncOptions): void {
  const how = 'BatchByKeyModule.registerBatcherAsync';
  if (typeof options !== 'object' || options === null)
    throw new InvalidOptionError(`${how} takes options objects, got ${describe(options)}`);
  onlyKnownOptions(`${how} options`, options, REGISTER_ASYNC_OPTION_NAMES);
  if (typeof options.name !== 'string' || options.name === '') {
    throw new InvalidOptionError(
      `${how} needs a name (the batcher's, for @InjectBatcher and @BatchProcessor), got ${describe(options.name)}`,
    );
  }
  if (typeof options.useFactory !== 'function') {
    throw new InvalidOptionError(`${how}({ name: '${options.name}' }) needs a useFactory function, got ${describe(options.useFactory)}`);
  }
}

/**
 * batch-by-key for NestJS. Import `forRoot` (or `forRootAsync`) once in the root module, and
 * `registerBatcher` in each module that pushes or processes:
 * ```ts
 * @Module({
 *   imports: [BatchByKeyModule.forRoot({ connection: process.env.REDIS_URL! }), BatchByKeyModule.registerBatcher({ name: 'segment-refresher' })],
 *   providers: [SegmentRefreshProcessor],
 * })
 * ```
 */
@Module({})
export class BatchByKeyModule {
  /** The Redis connection (and prefix) of every batcher in the application. */
  static forRoot(options: BatchByKeyRootOptions): DynamicModule {
    // The connection itself is checked when the registry is built (forRootAsync's comes later).
    if (typeof options === 'object' && options !== null) onlyKnownOptions('BatchByKeyModule.forRoot options', options, ROOT_OPTION_NAMES);
    return rootModule({ provide: ROOT_OPTIONS, useValue: options }, []);
  }

  /** `forRoot` with options from a factory: `inject` a config service, or the app's own ioredis client. */
  static forRootAsync(options: BatchByKeyRootAsyncOptions): DynamicModule {
    if (typeof options?.useFactory !== 'function') {
      throw new InvalidOptionError(`BatchByKeyModule.forRootAsync needs a useFactory function, got ${describe(options?.useFactory)}`);
    }
    onlyKnownOptions('BatchByKeyModule.forRootAsync options', options, ASYNC_OPTION_NAMES);
    const provider: FactoryProvider<BatchByKeyRootOptions | Promise<BatchByKeyRootOptions>> = {
      provide: ROOT_OPTIONS,
      // Nest calls it with the `inject` providers, which are the factory's declared parameters.
      useFactory: options.useFactory as (...args: unknown[]) => BatchByKeyRootOptions | Promise<BatchByKeyRootOptions>,
      inject: options.inject ?? [],
    };
    return rootModule(provider, options.imports ?? []);
  }

  /**
   * Provides a `Batcher` per options, injectable with `@InjectBatcher(name)` in this module (and
   * in modules this one exports it to). A batcher whose name has a `@BatchProcessor` class in the
   * application gets its handler and a worker; the others are producers (README: Producers).
   */
  static registerBatcher(...batchers: RegisterBatcherOptions[]): DynamicModule {
    for (const options of batchers) validateRegistration(options);
    uniqueNames(
      batchers.map((options) => options.name),
      'registerBatcher',
    );
    const providers = batchers.map((options): FactoryProvider => ({
      provide: getBatcherToken(options.name),
      useFactory: (registry: BatchByKeyRegistry | undefined) => registryOf(registry, options.name, 'registerBatcher').define(options),
      inject: [REGISTRY],
    }));
    return { module: BatchByKeyModule, providers, exports: providers.map((p) => p.provide) };
  }

  /**
   * `registerBatcher` with each batcher's options from a factory that Nest injects: `weight`,
   * `rateLimit`, `onTicketSettled`, `around` and the rest may then use the application's services
   * (a plan lookup, a mailer). The name is given here, for `@InjectBatcher` and `@BatchProcessor`;
   * the factory's options are checked as `registerBatcher`'s, when it answers, and the application
   * does not start if they are wrong.
   */
  static registerBatcherAsync(...batchers: RegisterBatcherAsyncOptions[]): DynamicModule {
    for (const options of batchers) validateAsyncRegistration(options);
    uniqueNames(
      batchers.map((options) => options.name),
      'registerBatcherAsync',
    );
    const providers = batchers.map(({ name, useFactory, inject }): FactoryProvider => ({
      provide: getBatcherToken(name),
      useFactory: async (registry: BatchByKeyRegistry | undefined, ...args: never[]) => {
        const made: unknown = await useFactory(...args);
        if (typeof made === 'object' && made !== null && 'name' in made) {
          throw new InvalidOptionError(
            `BatchByKeyModule.registerBatcherAsync({ name: '${name}' }): the factory's options must not set name`,
          );
        }
        const options = { ...(made as object), name } as RegisterBatcherOptions;
        validateRegistration(options);
        return registryOf(registry, name, 'registerBatcherAsync').define(options);
      },
      inject: [REGISTRY, ...(inject ?? [])],
    }));
    return {
      module: BatchByKeyModule,
      imports: batchers.flatMap((options) => options.imports ?? []),
      providers,
      exports: providers.map((p) => p.provide),
    };
  }
}
