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
