import { Inject, Injectable } from '@nestjs/common';
import { describe, InvalidOptionError } from '../core/errors';
import type { BatcherEvents, CreateWorkerOptions, Id, IterationContext } from '../core/types';

/** What a `@BatchProcessor` class must have: the work for one slice of one key (see `eachIteration`). */
export interface BatchHandler {
  eachIteration(ids: Id[], ctx: IterationContext): PromiseLike<unknown> | void;
}

/** The batcher events a processor's methods can listen to: those emitted where its worker runs. */
export type BatchWorkerEvent = 'slice:done' | 'slice:failed' | 'interrupted' | 'dead';

const WORKER_EVENTS: readonly BatchWorkerEvent[] = ['slice:done', 'slice:failed', 'interrupted', 'dead'];

/** @internal What `@BatchProcessor` recorded on a class. */
export interface ProcessorMetadata {
  name: string;
  workerOptions: CreateWorkerOptions;
}

/** @internal A method of a processor class that listens to one of its batcher's events. */
export interface EventBinding {
  event: BatchWorkerEvent;
  method: string | symbol;
}

// Kept in WeakMaps keyed by the class rather than in reflect-metadata: nothing here needs the
// global Reflect polyfill, and nothing can collide with another library's metadata keys.
const processors = new WeakMap<object, ProcessorMetadata>();
const listeners = new WeakMap<object, readonly EventBinding[]>();

/** Walks the class and its superclasses, so a subclass of a processor class is one too (as Nest's own metadata is inherited). */
function inherited<T>(map: WeakMap<object, T>, cls: unknown): T | undefined {
  for (let c = cls; typeof c === 'function' && c !== Function.prototype; c = Object.getPrototypeOf(c)) {
    const found = map.get(c);
    if (found !== undefined) return found;
  }
  return undefined;
}

/** @internal The `@BatchProcessor` metadata of a provider's class, if it has any. */
export const processorOf = (cls: unknown): ProcessorMetadata | undefined => inherited(processors, cls);

/** @internal The `@OnBatchEvent` methods of a processor's class (its superclasses' included). */
export function listenersOf(cls: unknown): EventBinding[] {
  const all: EventBinding[] = [];
  for (let c = cls; typeof c === 'function' && c !== Function.prototype; c = Object.getPrototypeOf(c)) {
    // An override decorated again in a subclass is still one listener.
    for (const binding of listeners.get(c) ?? []) {
      if (!all.some((b) => b.event === binding.event && b.method === binding.method)) all.push(binding);
    }
  }
  return all;
}

/** The injection token of the batcher registered as `name` (what `@InjectBatcher(name)` injects). */
export function getBatcherToken(name: string): string {
  return `batch-by-key:batcher:${name}`;
}

/** Injects the `Batcher` registered with `BatchByKeyModule.registerBatcher({ name })`. */
export function InjectBatcher(name: string): PropertyDecorator & ParameterDecorator {
  return Inject(getBatcherToken(name));
}

/**
 * Makes a provider class the handler of the batcher registered as `name`: its `eachIteration`
 * runs every slice, with the class's injected services at hand. The module finds the class among
 * the application's providers and starts a worker for it (BullMQ `workerOptions` such as
 * `concurrency`) on application bootstrap. The class is `@Injectable()` already; list it in a
 * module's `providers`. It must be a singleton (the default scope).
 */
export function BatchProcessor(name: string, workerOptions: CreateWorkerOptions = {}) {
  if (typeof name !== 'string' || name.length === 0) {
    throw new InvalidOptionError(`@BatchProcessor(name) needs the name of a registered batcher, got ${describe(name)}`);
  }
  if (typeof workerOptions !== 'object' || workerOptions === null) {
    throw new InvalidOptionError(`@BatchProcessor(name, workerOptions): workerOptions must be an object, got ${describe(workerOptions)}`);
  }
  // never[]: any constructor, whatever its parameters, as long as instances have eachIteration.
  return <T extends new (...args: never[]) => BatchHandler>(target: T): void => {
    processors.set(target, { name, workerOptions });
    Injectable()(target);
  };
}

/**
 * Calls the decorated method of a `@BatchProcessor` class on one of its batcher's events:
 * `'slice:failed'`, `'dead'`, `'interrupted'` or `'slice:done'` (payloads as in `BatcherEvents`).
 * A method that throws or rejects is logged, never turned into a failure of the slice.
 */
export function OnBatchEvent<E extends BatchWorkerEvent>(event: E) {
  if (!WORKER_EVENTS.includes(event)) {
    throw new InvalidOptionError(`@OnBatchEvent(event) takes one of ${WORKER_EVENTS.join(', ')}, got ${describe(event)}`);
  }
  // Generic in the method, so its parameter is checked against the event's payload.
  return <M extends (...args: BatcherEvents[E]) => unknown>(
    target: object,
    method: string | symbol,
    _descriptor: TypedPropertyDescriptor<M>,
  ): void => {
    const cls = target.constructor;
    listeners.set(cls, [...(listeners.get(cls) ?? []), { event, method }]);
  };
}
