import { Module } from 'node:module';

/**
 * `@azure/functions-core` for the local host. Under the Functions host, the Node worker provides
 * this module itself (it is never installed): `app.timer`, `app.storageQueue`, `app.http`,
 * `app.generic` and `app.hook.*` of the app's own `@azure/functions` hand their function metadata,
 * handlers and hooks to it. Installing this stand-in before the app's entry module loads lets the
 * local host see exactly what the app registered, through the app's own copy of the library, as
 * `func start` would, rather than a list Baton keeps on the side.
 */

/** One binding of a function, as `@azure/functions` describes it to the worker. */
export interface FunctionBinding {
  type: string;
  direction?: string;
  [property: string]: unknown;
}

export interface CapturedFunction {
  name: string;
  bindings: Record<string, FunctionBinding>;
  handler: (...args: unknown[]) => unknown;
}

export interface CapturedHook {
  name: string;
  callback: (context: unknown) => unknown;
}

/** What the app has registered so far; registrations made later are added as they come. */
export interface CapturedApp {
  readonly functions: CapturedFunction[];
  readonly hooks: CapturedHook[];
}

class Disposable {
  constructor(private onDispose: (() => void) | undefined) {}

  static from(...items: { dispose(): unknown }[]): Disposable {
    return new Disposable(() => items.forEach((item) => item.dispose()));
  }

  dispose(): void {
    const onDispose = this.onDispose;
    this.onDispose = undefined;
    onDispose?.();
  }
}

function remove<T>(list: T[], entry: T): void {
  const at = list.indexOf(entry);
  if (at >= 0) list.splice(at, 1);
}

let installed: CapturedApp | undefined;

/**
 * Makes `require('@azure/functions-core')` answer with the stand-in, for the rest of this process
 * (the library asks for it lazily, on its first registration). Idempotent: a second call returns
 * the same registry. `log` receives the library's system lines (level, text).
 */
export function installFunctionsCore(log: (level: string, message: string) => void): CapturedApp {
  if (installed) return installed;
  const captured: CapturedApp = { functions: [], hooks: [] };
  let programmingModel: unknown;
  const core = {
    version: 'baton-local-host',
    hostVersion: '4.0.0-local',
    Disposable,
    setProgrammingModel: (model: unknown) => {
      programmingModel = model;
    },
    getProgrammingModel: () => programmingModel,
    registerFunction: (
      metadata: { name: string; bindings?: Record<string, FunctionBinding> },
      handler: CapturedFunction['handler'],
    ) => {
      const entry: CapturedFunction = { name: metadata.name, bindings: metadata.bindings ?? {}, handler };
      captured.functions.push(entry);
      return new Disposable(() => remove(captured.functions, entry));
    },
    registerHook: (name: string, callback: CapturedHook['callback']) => {
      const entry: CapturedHook = { name, callback };
      captured.hooks.push(entry);
      return new Disposable(() => remove(captured.hooks, entry));
    },
    log: (level: string, _category: string, message: string) => log(level, message),
  };
  const prototype = Module.prototype as unknown as { require: (this: unknown, id: string) => unknown };
  prototype.require = new Proxy(prototype.require, {
    apply(target, self, args: [string]) {
      return args[0] === '@azure/functions-core' ? core : (Reflect.apply(target, self, args) as unknown);
    },
  });
  installed = captured;
  return captured;
}
