import {
  Inject,
  Injectable,
  type OnApplicationBootstrap,
  type OnApplicationShutdown,
  type OnModuleDestroy,
  type OnModuleInit,
} from '@nestjs/common';
import { DiscoveryService, ModulesContainer } from '@nestjs/core';
import type { Worker } from '../bullmq';
import { checkWorkerOptions, createBatcher } from '../batcher';
import { describe, InvalidOptionError } from '../core/errors';
import { log } from '../core/logger';
import { onlyKnownOptions } from '../core/validate';
import type { Batcher, EachIteration, KeyWorker, Logger } from '../core/types';
import { listenersOf, processorOf, type BatchHandler, type ProcessorMetadata } from './decorators';
import { nestLogger } from './logger';
import { ROOT_OPTION_NAMES, type BatchByKeyRootOptions, type RegisterBatcherOptions } from './options';

/** @internal The injection token of the root options (forRoot's, or forRootAsync's factory's). */
export const ROOT_OPTIONS = Symbol('batch-by-key:root-options');

type ProviderWrapper = ReturnType<DiscoveryService['getProviders']>[number];

interface Processor {
  wrapper: ProviderWrapper;
  meta: ProcessorMetadata;
}

interface Registered {
  options: RegisterBatcherOptions;
  batcher: Batcher;
  processor: Processor | undefined;
  logger: Logger;
}

const classOf = (wrapper: ProviderWrapper): string =>
  (typeof wrapper.metatype === 'function' && wrapper.metatype.name) || String(wrapper.name);

/**
 * Equal registrations of one name share a batcher (a feature module imported twice, or two
 * modules that each register what they inject); functions and class instances compare by identity.
 */
function sameOptions(a: unknown, b: unknown): boolean {
  if (Object.is(a, b)) return true;
  if (Array.isArray(a) && Array.isArray(b)) return a.length === b.length && a.every((v, i) => sameOptions(v, b[i]));
  const plain = (v: unknown): v is Record<string, unknown> =>
    typeof v === 'object' && v !== null && Object.getPrototypeOf(v) === Object.prototype;
  if (!plain(a) || !plain(b)) return false;
  const keys = Object.keys(a).filter((k) => a[k] !== undefined);
  return keys.length === Object.keys(b).filter((k) => b[k] !== undefined).length && keys.every((k) => sameOptions(a[k], b[k]));
}

type BootstrapHook = { onApplicationBootstrap?: () => unknown };

/**
 * The instance of the application's root module class, whose `onApplicationBootstrap` Nest calls
 * after every other module's: the module at distance 1 (Nest's own distance, from the root; global
 * modules are at Number.MAX_VALUE), when Nest will call its hook (a static singleton).
 */
function rootModuleClass(modules: ModulesContainer): BootstrapHook | undefined {
  const root = [...modules.values()].find((module) => module.distance === 1);
  const host = root?.providers.get(root.metatype);
  if (!host?.isDependencyTreeStatic() || typeof host.instance !== 'object' || host.instance === null) return undefined;
  return host.instance;
}

/**
 * Owns every batcher of the application: creates them (one per name) for `registerBatcher`'s
 * providers, gives the ones that have a `@BatchProcessor` their handler and a worker, and closes
 * them all on shutdown.
 * @internal
 */
@Injectable()
export class BatchByKeyRegistry implements OnModuleInit, OnApplicationBootstrap, OnModuleDestroy, OnApplicationShutdown {
  private readonly registered = new Map<string, Registered>();
  private readonly workers: { worker: Worker; logger: Logger }[] = [];

  // Explicit @Inject tokens: the build emits no decorator metadata, so types alone would inject nothing.
  constructor(
    @Inject(ROOT_OPTIONS) private readonly root: BatchByKeyRootOptions,
    @Inject(DiscoveryService) private readonly discovery: DiscoveryService,
    @Inject(ModulesContainer) private readonly modules: ModulesContainer,
  ) {
    if (typeof root !== 'object' || root === null || root.connection === undefined || root.connection === null) {
      throw new InvalidOptionError(
        `BatchByKeyModule.forRoot needs { connection }: a Redis URL, ioredis options or an ioredis client; got ${root === null || typeof root !== 'object' ? describe(root) : 'no connection'}`,
      );
    }
    // forRoot's were checked when the module was defined; forRootAsync's factory answers only now.
    onlyKnownOptions('BatchByKeyModule root options', root, ROOT_OPTION_NAMES);
  }

  /** The batcher registered as `options.name`, created on the first registration of that name. */
  define(options: RegisterBatcherOptions): Batcher {
    const existing = this.registered.get(options.name);
    if (existing) {
      if (sameOptions(existing.options, options)) return existing.batcher;
      throw new InvalidOptionError(
        `BatchByKeyModule.registerBatcher: '${options.name}' is registered twice with different options; register it once and export it from its module`,
      );
    }
    // The container is fully scanned before any provider is built, so the processor (if any) is
    // known now, while its instance may not exist yet: the handler looks it up at each run.
    const found = this.processors().filter((p) => p.meta.name === options.name);
    if (found.length > 1) {
      throw new InvalidOptionError(
        `@BatchProcessor('${options.name}') is on ${found.length} providers (${found.map((p) => classOf(p.wrapper)).join(', ')}): one batcher has one handler`,
      );
    }
    const processor = found[0];
    const logger = options.logger ?? nestLogger();
    const handler =
      processor &&
      ((): EachIteration => {
        const instance = processor.wrapper.instance as BatchHandler;
        return (ids, ctx) => instance.eachIteration(ids, ctx);
      });
    const batcher = createBatcher(
      { ...options, connection: this.root.connection, prefix: options.prefix ?? this.root.prefix, logger },
      handler,
    );
    this.registered.set(options.name, { options, batcher, processor, logger });
    return batcher;
  }

  /** Checks every processor (its worker options included) and wires its `@OnBatchEvent` methods; runs once all providers exist, before any worker starts. */
  onModuleInit(): void {
    // Two roots would split the batchers between two registries, and each would miss the other's.
    if (this.discovery.getProviders().filter((wrapper) => wrapper.metatype === BatchByKeyRegistry).length > 1) {
      throw new InvalidOptionError(
        'BatchByKeyModule.forRoot (or forRootAsync) is imported more than once: import it once, in the root module',
      );
    }
    for (const { wrapper, meta } of this.processors()) {
      const where = `@BatchProcessor('${meta.name}') on ${classOf(wrapper)}`;
      const registered = this.registered.get(meta.name);
      if (!registered) {
        throw new InvalidOptionError(
          `${where}: no batcher has that name; import BatchByKeyModule.registerBatcher({ name: '${meta.name}' }) in its module`,
        );
      }
      if (!wrapper.isDependencyTreeStatic() || wrapper.isTransient) {
        throw new InvalidOptionError(
          `${where}: a processor must be a singleton provider (the default scope): its worker outlives every request`,
        );
      }
      const instance = wrapper.instance as Record<string | symbol, unknown> | undefined;
      if (typeof instance?.eachIteration !== 'function')
        throw new InvalidOptionError(`${where}: the class has no eachIteration(ids, ctx) method`);
      // Every processor's worker options now, so that a typo in one fails the start before any worker runs.
      checkWorkerOptions(registered.batcher, meta.workerOptions, `${where} workerOptions`);
      for (const { event, method } of listenersOf(wrapper.metatype)) {
        const listener = instance[method];
        if (typeof listener !== 'function')
          throw new InvalidOptionError(`${where}: @OnBatchEvent('${event}') is on ${String(method)}, which is not a method`);
        registered.batcher.on(event, (...args: unknown[]) => {
          const what = `batch-by-key: @OnBatchEvent('${event}') ${classOf(wrapper)}.${String(method)}`;
          try {
            const result: unknown = listener.apply(instance, args);
            // An async listener's rejection would otherwise be unhandled and could end the process.
            if (typeof (result as PromiseLike<unknown> | undefined)?.then === 'function') {
              (result as PromiseLike<unknown>).then(undefined, (err: unknown) =>
                log(registered.logger, 'warn', `${what} rejected`, { err }),
              );
            }
          } catch (err) {
            log(registered.logger, 'warn', `${what} threw`, { err });
          }
        });
      }
    }
  }

  /**
   * Workers start once the application has bootstrapped: a provider whose own
   * `onApplicationBootstrap` throws fails the start, and then nothing may run. Nest calls this
   * hook module by module, global modules (this one) first and the root module's class last, so
   * the workers start at the end of the root module's own hook. Where that hook is not reached
   * (a root module class that is not a static singleton), they start here, as before.
   */
  async onApplicationBootstrap(): Promise<void> {
    const root = rootModuleClass(this.modules);
    if (!root) return this.startWorkers();
    const own = Object.getOwnPropertyDescriptor(root, 'onApplicationBootstrap');
    const inherited = root.onApplicationBootstrap;
    root.onApplicationBootstrap = async () => {
      if (own) Object.defineProperty(root, 'onApplicationBootstrap', own);
      else delete root.onApplicationBootstrap;
      await inherited?.call(root);
      await this.startWorkers();
    };
  }

  /**
   * BullMQ's own checks of a worker's options (a `concurrency` of 0, say) run only as its Worker
   * is built: every worker is built first, not running, and they start only once all are built.
   * A worker that fails to build fails the start with none running (those built are closed).
   */
  private async startWorkers(): Promise<void> {
    const built: { worker: KeyWorker; logger: Logger; autorun: boolean }[] = [];
    try {
      for (const { batcher, processor, logger } of this.registered.values()) {
        if (!processor) continue;
        const options = processor.meta.workerOptions;
        built.push({ worker: batcher.createWorker({ ...options, autorun: false }), logger, autorun: options?.autorun !== false });
      }
    } catch (err) {
      await Promise.all(built.map(({ worker }) => worker.close()));
      throw err;
    }
    for (const { worker, logger, autorun } of built) {
      this.workers.push({ worker, logger });
      if (autorun) worker.run().catch((err: unknown) => log(logger, 'error', 'batch-by-key: a worker stopped with an error', { err }));
    }
  }

  /**
   * Workers close first, while the application's services are still up: BullMQ waits for the
   * running jobs, and each of our runs stops after its current slice and requeues its key.
   */
  async onModuleDestroy(): Promise<void> {
    await Promise.all(
      this.workers
        .splice(0)
        .map(({ worker, logger }) =>
          worker.close().catch((err: unknown) => log(logger, 'error', 'batch-by-key: closing a worker failed', { err })),
        ),
    );
  }

  /** Batchers close last, after Nest has closed the HTTP server: no request can push to a closed batcher. */
  async onApplicationShutdown(): Promise<void> {
    await Promise.all(
      [...this.registered.values()].map(({ batcher, logger }) =>
        batcher.close().catch((err: unknown) => log(logger, 'error', 'batch-by-key: closing a batcher failed', { err })),
      ),
    );
  }

  private processors(): Processor[] {
    return this.discovery.getProviders().flatMap((wrapper) => {
      const meta = processorOf(wrapper.metatype);
      return meta ? [{ wrapper, meta }] : [];
    });
  }
}
