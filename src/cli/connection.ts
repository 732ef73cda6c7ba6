import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { EXIT } from './exit-codes';
import { InvalidSettingError } from '../errors';
import { parseBatonSettings } from '../app/settings';
import { parseStorageSettings, type StorageSettings } from '../storage/connection';
import { redactSecrets } from '../redact';
import { type Env } from '../storage/setting';

/** Where the storage connection came from, in the order the CLI looks. */
export type ConnectionSource = '--connection' | 'AzureWebJobsStorage' | 'local.settings.json';

export interface ResolvedConnection {
  storage: StorageSettings;
  source: ConnectionSource;
  hub: string;
  leaseContainer: string;
}

export interface ConnectionInput {
  /** The `--connection` option. */
  connection?: string | undefined;
  /** The `--hub` option. */
  hub?: string | undefined;
  env: Env;
  /** Where `local.settings.json` is looked for. */
  cwd: string;
}

/**
 * A failure the CLI reports as one line (prefixed `baton: `) and ends with `exitCode`
 * (`EXIT.failed` unless the command line itself is wrong: `EXIT.usage`). The message never
 * holds a setting's value.
 */
export class CliError extends Error {
  constructor(
    message: string,
    readonly exitCode: number = EXIT.failed,
  ) {
    super(message);
    this.name = 'CliError';
  }
}

const STORAGE = 'AzureWebJobsStorage';
export const LOCAL_SETTINGS_FILE = 'local.settings.json';

const has = (env: Env, name: string) => (env[name]?.trim() ?? '') !== '';

/** True when `env` holds a connection string or any identity-based `AzureWebJobsStorage__*` setting. */
function hasStorageSettings(env: Env): boolean {
  return has(env, STORAGE) || Object.keys(env).some((k) => k.startsWith(`${STORAGE}__`) && has(env, k));
}

/**
 * Finds the storage connection (`--connection`, then the environment's `AzureWebJobsStorage`
 * and `AzureWebJobsStorage__*`, then `Values` of `local.settings.json` in `cwd`) and the hub
 * (`--hub`, then `BATON_HUB` from the environment, then from `local.settings.json`, then
 * `baton`). Throws `CliError` with one line that names the source but never a value.
 */
export function resolveConnection(input: ConnectionInput): ResolvedConnection {
  const { env } = input;
  let local: Env | undefined;
  const localValues = (): Env => (local ??= readLocalSettings(input.cwd));

  let storage: StorageSettings;
  let source: ConnectionSource;
  if (input.connection !== undefined) {
    source = '--connection';
    if (input.connection.trim() === '') throw new CliError('--connection is empty: pass a storage connection string', EXIT.usage);
    storage = asCliError(() => parseStorageSettings({ [source]: input.connection }, { prefix: source }));
  } else if (hasStorageSettings(env)) {
    source = STORAGE;
    storage = asCliError(() => parseStorageSettings(env), ' (from the environment)');
  } else {
    const values = localValues();
    if (!hasStorageSettings(values)) {
      throw new CliError(
        `no storage connection: checked --connection, the ${STORAGE} environment variable (and ${STORAGE}__*), ` +
          `and Values.${STORAGE} in ${join(input.cwd, LOCAL_SETTINGS_FILE)}. Pass --connection "<connection string>", ` +
          `set ${STORAGE}, or give ${LOCAL_SETTINGS_FILE} {"Values":{"${STORAGE}":"UseDevelopmentStorage=true"}} for a local Azurite.`,
      );
    }
    source = LOCAL_SETTINGS_FILE;
    storage = asCliError(() => parseStorageSettings(values), ` (in ${LOCAL_SETTINGS_FILE})`);
  }

  // Only the two settings the CLI needs are parsed, so an unrelated bad setting cannot stop it.
  const pick = (name: string): string | undefined => (has(env, name) ? env[name] : localValues()[name]);
  const hubFromFlag = input.hub !== undefined;
  const settings = asCliError(() =>
    parseBatonSettings({
      BATON_HUB: hubFromFlag ? input.hub : pick('BATON_HUB'),
      BATON_LEASE_CONTAINER: pick('BATON_LEASE_CONTAINER'),
    }),
  );
  return { storage, source, hub: settings.hub, leaseContainer: settings.leaseContainer };

  function asCliError<T>(fn: () => T, where = ''): T {
    try {
      return fn();
    } catch (err) {
      if (!(err instanceof InvalidSettingError)) throw err;
      const hubFlag = err.setting === 'BATON_HUB' && hubFromFlag;
      const message = hubFlag ? err.message.replace(/^BATON_HUB/, '--hub') : err.message;
      // A bad --connection or --hub value is a usage error; a bad setting from the environment is not.
      const usage = hubFlag || err.setting === '--connection';
      throw new CliError(redactSecrets(message) + where, usage ? EXIT.usage : EXIT.failed);
    }
  }
}

/** `Values` of `local.settings.json` in `cwd`; empty when there is no such file. */
export function readLocalSettings(cwd: string): Env {
  const path = join(cwd, LOCAL_SETTINGS_FILE);
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return {};
    throw new CliError(`cannot read ${path} (${(err as NodeJS.ErrnoException).code ?? 'error'})`);
  }
  let parsed: unknown;
  try {
    parsed = JSON.parse(text.replace(/^\uFEFF/, ''));
  } catch {
    // The parser's message can quote the file's text, which may hold a key; say only where.
    throw new CliError(
      `${path} is not valid JSON; it must be an object such as {"Values":{"${STORAGE}":"UseDevelopmentStorage=true"}}`,
    );
  }
  const values = (parsed as { Values?: unknown } | null)?.Values;
  if (values === undefined) return {};
  if (typeof values !== 'object' || values === null || Array.isArray(values)) {
    throw new CliError(`${path}: Values must be an object of setting names to strings`);
  }
  const env: Env = {};
  for (const [name, value] of Object.entries(values)) {
    if (typeof value === 'string') env[name] = value;
    else if (typeof value === 'number' || typeof value === 'boolean') env[name] = String(value);
  }
  return env;
}
