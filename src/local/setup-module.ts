import { resolve } from 'node:path';
import { pathToFileURL } from 'node:url';

/** What `baton start --setup <module>` gives the module's `setup` function. */
export interface SetupContext {
  /**
   * The settings every instance starts with: the app's own, `AzureWebJobsStorage` naming the
   * cluster's Azurite and `BATON_HUB` its hub.
   */
  env: Record<string, string | undefined>;
  /** Aborted when the cluster is asked to stop while the setup runs: stop soon after. */
  signal: AbortSignal;
  /** Writes one line to the cluster's output. */
  log(line: string): void;
}

export type SetupFunction = (context: SetupContext) => Promise<void> | void;

/**
 * Loads the module `--setup` names (a path, compiled JavaScript): the function it exports as
 * `setup`, or as its default. Called before Azurite starts, so a module that is missing or
 * exports no function is one line, not a cluster that stops half-way.
 */
export async function loadSetupModule(path: string): Promise<SetupFunction> {
  const file = resolve(path);
  let mod: { setup?: unknown; default?: unknown };
  try {
    mod = (await import(pathToFileURL(file).href)) as typeof mod;
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    const why = code === 'ERR_MODULE_NOT_FOUND' || code === 'MODULE_NOT_FOUND' ? 'no such module' : (err as Error).message;
    throw new Error(`--setup ${path}: cannot load it (${why.split('\n')[0]})`);
  }
  // A CommonJS module's exports arrive as the default export too.
  const nested = (mod.default as { setup?: unknown; default?: unknown } | undefined) ?? {};
  const fn = [mod.setup, nested.setup, mod.default, nested.default].find((v) => typeof v === 'function');
  if (!fn) throw new Error(`--setup ${path}: it exports no function named setup (nor a default function)`);
  return fn as SetupFunction;
}
