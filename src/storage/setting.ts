import type * as z from '../zod';
import { InvalidSettingError } from '../errors.js';

/** App settings as the process sees them (`process.env`, or a test's own). */
export type Env = Record<string, string | undefined>;

// App settings left blank in the portal arrive as empty strings; treat them as unset.
export function readSetting(env: Env, name: string): string | undefined {
  const value = env[name]?.trim();
  return value ? value : undefined;
}

/** Parses one setting; the first issue becomes a one-line error that never echoes the value. */
export function parseSetting<T extends z.ZodMiniType>(schema: T, name: string, value: unknown): z.output<T> {
  const result = schema.safeParse(value);
  if (result.success) return result.data;
  const detail = result.error.issues[0]?.message ?? 'is invalid';
  throw new InvalidSettingError(name, `${name} ${detail}`.replace(/\s+/g, ' '));
}

/**
 * A schema built when first used. Every setting has one, and building a zod schema costs an app's
 * start some 20 µs; so a setting left unset takes its default as it is and builds none.
 */
export function lazily<T>(build: () => T): () => T {
  let built: T | undefined;
  return () => (built ??= build());
}

/** A setting's value as `schema` reads it, or `fallback` (what its default reads as) when unset. */
export function settingOr<T>(env: Env, name: string, schema: () => z.ZodMiniType<T, string>, fallback: T): T {
  const value = readSetting(env, name);
  return value === undefined ? fallback : parseSetting(schema(), name, value);
}
