import { existsSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { z } from 'zod';

/** The parts of host.json the local host honours, with the Functions host's defaults. */
export interface HostQueueConfig {
  batchSize: number;
  newBatchThreshold: number;
  maxDequeueCount: number;
  /** Delay before a failed message is retried (host.json `visibilityTimeout`), in seconds. */
  retryDelaySeconds: number;
  messageEncoding: 'base64' | 'none';
  /** Longest wait between polls of an idle queue (host.json `maxPollingInterval`; the host's default is 1 minute). */
  maxPollingIntervalMs?: number;
  /**
   * How long the host lets one invocation run (host.json `functionTimeout`), in seconds; undefined
   * when unbounded (`-1`). Absent from host.json: 30 minutes, the default on Flex Consumption and
   * Premium (the older Consumption plan's is 5).
   */
  functionTimeoutSeconds?: number;
}

/** host.json `functionTimeout` when it is not set: Flex Consumption's and Premium's default. */
export const DEFAULT_FUNCTION_TIMEOUT_SECONDS = 30 * 60;

const timespan = z
  .string()
  .regex(/^(\d+):(\d{2}):(\d{2})$/, 'must be a hh:mm:ss time span')
  .transform((value) => {
    const [h, m, s] = value.split(':').map(Number) as [number, number, number];
    return h * 3600 + m * 60 + s;
  });

const hostJsonSchema = z.object({
  // `-1`: no limit (Premium and Dedicated plans).
  functionTimeout: z.union([z.literal('-1'), timespan]).optional(),
  extensions: z
    .object({
      queues: z
        .object({
          batchSize: z.number().int().min(1).max(32).default(16),
          newBatchThreshold: z.number().int().min(0).optional(),
          maxDequeueCount: z.number().int().min(1).default(5),
          visibilityTimeout: timespan.default(0),
          messageEncoding: z.enum(['base64', 'none']).default('base64'),
          // A time span, or milliseconds as a number, as the host accepts both.
          maxPollingInterval: z
            .union([timespan.transform((seconds) => seconds * 1000), z.number().int()])
            .refine((ms) => ms >= 100, 'must be at least 100 ms')
            .default(60_000),
        })
        .default({
          batchSize: 16,
          maxDequeueCount: 5,
          visibilityTimeout: 0,
          messageEncoding: 'base64',
          maxPollingInterval: 60_000,
        }),
    })
    .default({
      queues: { batchSize: 16, maxDequeueCount: 5, visibilityTimeout: 0, messageEncoding: 'base64', maxPollingInterval: 60_000 },
    }),
});

/** The app settings that override host.json's queue settings, as the Functions host reads them. */
export const QUEUE_OVERRIDE_PREFIX = 'AzureFunctionsJobHost__extensions__queues__';
const HOST_PREFIX = 'azurefunctionsjobhost__';
const QUEUE_KEYS = [
  'batchSize',
  'newBatchThreshold',
  'maxDequeueCount',
  'visibilityTimeout',
  'messageEncoding',
  'maxPollingInterval',
];

/**
 * host.json's queue settings with the `AzureFunctionsJobHost__extensions__queues__*` app
 * settings laid over them, as the host does (the deploy sets maxDequeueCount from
 * BATON_MAX_ATTEMPTS that way). Names match without regard to case, as the host's do.
 */
function withOverrides(raw: unknown, env: Record<string, string | undefined>): { raw: unknown; from: Map<string, string> } {
  const from = new Map<string, string>();
  const queues: Record<string, unknown> = {};
  for (const [name, value] of Object.entries(env)) {
    if (value === undefined || name.length <= QUEUE_OVERRIDE_PREFIX.length) continue;
    if (name.slice(0, QUEUE_OVERRIDE_PREFIX.length).toLowerCase() !== QUEUE_OVERRIDE_PREFIX.toLowerCase()) continue;
    const key = QUEUE_KEYS.find((k) => k.toLowerCase() === name.slice(QUEUE_OVERRIDE_PREFIX.length).toLowerCase());
    if (!key) continue;
    from.set(key, name);
    // App settings are text; host.json's numbers are numbers.
    queues[key] = /^\d+$/.test(value.trim()) ? Number(value.trim()) : value.trim();
  }
  if (from.size === 0) return { raw, from };
  const base = (raw ?? {}) as { extensions?: { queues?: Record<string, unknown> } };
  return {
    raw: { ...base, extensions: { ...base.extensions, queues: { ...base.extensions?.queues, ...queues } } },
    from,
  };
}

/**
 * Reads the queue settings from a host.json and the app settings that override it; a malformed
 * one fails with the path (or the app setting) and the problem.
 */
export function readHostQueueConfig(path = 'host.json', env: Record<string, string | undefined> = process.env): HostQueueConfig {
  let fromFile: unknown;
  try {
    fromFile = JSON.parse(readFileSync(path, 'utf8'));
  } catch (err) {
    throw new Error(`cannot read ${path}: ${err instanceof Error ? err.message : String(err)}`);
  }
  const { raw, from } = withOverrides(fromFile, env);
  // The host reads AzureFunctionsJobHost__functionTimeout over host.json's, as it does for queues.
  const timeoutSetting = Object.keys(env).find((name) => name.toLowerCase() === `${HOST_PREFIX}functiontimeout`);
  const timeoutOverride = timeoutSetting === undefined ? undefined : env[timeoutSetting]?.trim();
  if (timeoutOverride) {
    const checked = hostJsonSchema.shape.functionTimeout.safeParse(timeoutOverride);
    if (!checked.success) throw new Error(`${timeoutSetting}: must be a hh:mm:ss time span or -1`);
  }
  const parsed = hostJsonSchema.safeParse(
    timeoutOverride && typeof raw === 'object' && raw !== null ? { ...raw, functionTimeout: timeoutOverride } : raw,
  );
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    const key = issue?.path[2];
    const setting = typeof key === 'string' ? from.get(key) : undefined;
    if (setting) throw new Error(`${setting}: ${issue?.message ?? 'is invalid'}`);
    throw new Error(`${path}: ${issue?.path.join('.') ?? ''} ${issue?.message ?? 'is invalid'}`.trim());
  }
  const q = parsed.data.extensions.queues;
  const timeout = parsed.data.functionTimeout;
  return {
    functionTimeoutSeconds: timeout === '-1' ? undefined : (timeout ?? DEFAULT_FUNCTION_TIMEOUT_SECONDS),
    batchSize: q.batchSize,
    newBatchThreshold: q.newBatchThreshold ?? Math.floor(q.batchSize / 2),
    maxDequeueCount: q.maxDequeueCount,
    retryDelaySeconds: q.visibilityTimeout,
    messageEncoding: q.messageEncoding,
    maxPollingIntervalMs: q.maxPollingInterval,
  };
}

/** The app's host.json: the nearest one at or above `from` (the app root, wherever the code was compiled to). */
export function findHostJson(from: string): string {
  for (let dir = from; ; dir = dirname(dir)) {
    const candidate = join(dir, 'host.json');
    if (existsSync(candidate)) return candidate;
    if (dirname(dir) === dir) throw new Error(`no host.json found at or above ${from}`);
  }
}
