import { existsSync, readFileSync } from 'node:fs';
import { isAbsolute, join, resolve } from 'node:path';
import type { HttpMethod } from '@azure/functions';
import { globSync, isDynamicPattern } from 'tinyglobby';
import { InvalidSettingError } from '../errors';
import { readSetting, type Env } from '../storage/setting';
import type { Registration } from '../app/registration-types';
import { installFunctionsCore, type CapturedFunction, type CapturedHook, type FunctionBinding } from './functions-core';

/** The setting that names the app's folder for an instance process; `baton start` sets it. */
export const APP_SETTING = 'BATON_APP';
/** A host.json to run the app under instead of its own (tests run an app under other host settings). */
export const HOST_JSON_SETTING = 'BATON_HOST_JSON';

/** The host.json the local host runs the app in `appDir` with: `BATON_HOST_JSON`, else the app's own. */
export function appHostJson(appDir: string, env: Env): { path: string; fromSetting: boolean } {
  const fromSetting = readSetting(env, HOST_JSON_SETTING);
  return fromSetting ? { path: fromSetting, fromSetting: true } : { path: join(appDir, 'host.json'), fromSetting: false };
}

/** An app loaded as the Functions host loads one: its entry module run, its registrations read. */
export interface LoadedApp {
  /** The app's folder (where its package.json and host.json are). */
  readonly dir: string;
  readonly registrations: Registration[];
  /** Runs the app's `appStart` hooks, in the order they were registered. */
  start(): Promise<void>;
  /** Runs the app's `appTerminate` hooks (Baton's ends the term and flushes telemetry). */
  terminate(): Promise<void>;
}

const RUNS = 'baton start runs timerTrigger, queueTrigger and httpTrigger functions';
const DURABLE_TRIGGERS = new Set(['orchestrationTrigger', 'activityTrigger', 'entityTrigger']);
/** The storage connection the local host serves (its own Azurite). */
const STORAGE = 'AzureWebJobsStorage';

function refuse(message: string): never {
  throw new InvalidSettingError(APP_SETTING, message);
}

/**
 * The entry modules of the app in `dir`: package.json's `main`, as the Node worker finds them. A
 * glob (the Functions TypeScript template's `dist/src/{index.js,functions/*.js}`) is expanded as
 * the worker expands it, in path order.
 */
export function appEntries(dir: string): string[] {
  const manifest = join(dir, 'package.json');
  let main: unknown;
  try {
    main = (JSON.parse(readFileSync(manifest, 'utf8')) as { main?: unknown }).main;
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    refuse(
      `${manifest}: ${code === 'ENOENT' ? 'not found; run baton start in the Functions app' : `cannot read it (${code ?? 'not JSON'})`}`,
    );
  }
  if (typeof main !== 'string' || main.trim() === '') {
    refuse(`${manifest} has no "main": name the module that registers the app's functions, as the Functions host needs`);
  }
  if (isDynamicPattern(main)) {
    const found = globSync(main, { cwd: dir, absolute: true, onlyFiles: true }).sort();
    if (found.length === 0) refuse(`${manifest} "main" is ${main}, which matches no file: build the app first`);
    return found;
  }
  const entry = isAbsolute(main) ? main : resolve(dir, main);
  if (!existsSync(entry) && !existsSync(`${entry}.js`)) {
    refuse(`${manifest} "main" names ${main}, which does not exist: build the app first`);
  }
  return [entry];
}

/**
 * Loads the app in `dir` with the local host's `@azure/functions-core`, and turns what it
 * registered into the local host's registrations. Anything this host cannot run as the Functions
 * host would (another trigger, an extra binding, an invocation hook) is refused with one line
 * naming the function, rather than silently left out.
 */
export function loadFunctionsApp(dir: string, log: (level: string, message: string) => void): LoadedApp {
  const entries = appEntries(dir);
  const captured = installFunctionsCore(log);
  // What this load adds: a process that inspects apps (a test, the CLI) may load more than one.
  const [functionsBefore, hooksBefore] = [captured.functions.length, captured.hooks.length];
  for (const entry of entries) require(entry);
  const functions = captured.functions.slice(functionsBefore);
  const hooks = captured.hooks.slice(hooksBefore);
  if (functions.length === 0) {
    refuse(`the app in ${dir} registered no functions: does ${entries.join(' or ')} call registerBaton(app, ...)?`);
  }
  const registrations = functions.map(toRegistration);
  for (const hook of hooks) {
    if (hook.name !== 'appStart' && hook.name !== 'appTerminate') {
      refuse(`the app registers a ${hook.name} hook, which baton start does not run (it runs appStart and appTerminate)`);
    }
  }
  const run = (name: string) => async () => {
    for (const hook of hooks.filter((h: CapturedHook) => h.name === name)) {
      await hook.callback({ hookData: {}, appHookData: {}, functionAppDirectory: dir });
    }
  };
  return { dir, registrations, start: run('appStart'), terminate: run('appTerminate') };
}

function toRegistration(fn: CapturedFunction): Registration {
  const bindings = Object.entries(fn.bindings);
  const triggers = bindings.filter(([, b]) => /trigger$/i.test(b.type));
  if (triggers.length !== 1) refuse(`function ${fn.name} has ${triggers.length} triggers; a function has one`);
  const [, trigger] = triggers[0]!;
  for (const [name, binding] of bindings) {
    if (binding === trigger) continue;
    // An http function answers through its return binding; the local host sends that response.
    if (trigger.type === 'httpTrigger' && name === '$return' && binding.type === 'http') continue;
    refuse(
      `function ${fn.name} has a ${binding.type} ${binding.direction ?? ''} binding (${name}), which baton start does not provide`,
    );
  }
  const handler = fn.handler as never;
  switch (trigger.type) {
    case 'timerTrigger':
      if (trigger.runOnStartup === true) refuse(`function ${fn.name}: runOnStartup is not run by baton start`);
      return { kind: 'timer', name: fn.name, schedule: text(fn, trigger, 'schedule'), handler };
    case 'queueTrigger': {
      const connection = typeof trigger.connection === 'string' ? trigger.connection : STORAGE;
      if (connection !== STORAGE) {
        refuse(
          `function ${fn.name} reads queues through connection ${connection}; baton start serves ${STORAGE} (its Azurite) only`,
        );
      }
      return { kind: 'queue', name: fn.name, queueName: text(fn, trigger, 'queueName'), connection, handler };
    }
    case 'httpTrigger':
      return {
        kind: 'http',
        name: fn.name,
        route: typeof trigger.route === 'string' ? trigger.route : fn.name,
        methods: Array.isArray(trigger.methods) ? (trigger.methods as HttpMethod[]) : ['GET', 'POST'],
        authLevel: trigger.authLevel === 'function' || trigger.authLevel === 'admin' ? trigger.authLevel : 'anonymous',
        handler,
      };
    default:
      if (DURABLE_TRIGGERS.has(trigger.type)) {
        refuse(
          `function ${fn.name} is a Durable Functions ${trigger.type}: it needs the Functions host with the Durable extension (func start, or Azure); ${RUNS}`,
        );
      }
      return refuse(`function ${fn.name} has a ${trigger.type}, which baton start does not run; ${RUNS}`);
  }
}

/** A binding's text property, with `%SETTING%` replaced by the app setting, as the host does. */
function text(fn: CapturedFunction, binding: FunctionBinding, property: string): string {
  const value = binding[property];
  if (typeof value !== 'string' || value === '') refuse(`function ${fn.name}: its ${binding.type} has no ${property}`);
  return value.replace(/%([^%]+)%/g, (_, setting: string) => {
    const resolved = process.env[setting];
    if (resolved === undefined || resolved === '') {
      refuse(`function ${fn.name}: its ${binding.type} ${property} names %${setting}%, which is not set`);
    }
    return resolved;
  });
}

/**
 * The app an instance runs when none is named: the reference app in `functions/` beside this
 * package, which only this repository has (`baton start` always names the app it runs).
 */
export function referenceApp(from: string = __dirname): string {
  let dir = from;
  while (!existsSync(join(dir, 'package.json'))) {
    const up = resolve(dir, '..');
    if (up === dir) return join(from, 'functions');
    dir = up;
  }
  return join(dir, 'functions');
}
