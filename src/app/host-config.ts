import { existsSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import * as z from '../zod';
import { messageOf } from '../errors';

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

const timespan = z.pipe(
  z.string().check(z.regex(/^(\d+):(\d{2}):(\d{2})$/, 'must be a hh:mm:ss time span')),
  z.transform((value: string) => {
    const [h, m, s] = value.split(':').map(Number) as [number, number, number];
    return h * 3600 + m * 60 + s;
  }),
);

const hostJsonSchema = z.object({
  // `-1`: no limit (Premium and Dedicated plans).
  functionTimeout: z.optional(z.union([z.literal('-1'), timespan], { error: 'must be a hh:mm:ss time span or -1' })),
  extensions: z._default(
    z.object({
      queues: z._default(
        z.object({
          batchSize: z._default(z.number().check(z.int(), z.gte(1), z.lte(32)), 16),
          newBatchThreshold: z.optional(z.number().check(z.int(), z.gte(0))),
          maxDequeueCount: z._default(z.number().check(z.int(), z.gte(1)), 5),
          visibilityTimeout: z._default(timespan, 0),
          messageEncoding: z._default(z.enum(['base64', 'none']), 'base64'),
          // A time span, or milliseconds as a number, as the host accepts both.
          maxPollingInterval: z._default(
            z
              .union([
                z.pipe(
                  timespan,
                  z.transform((seconds: number) => seconds * 1000),
                ),
                z.number().check(z.int()),
              ])
              .check(z.refine((ms) => ms >= 100, 'must be at least 100 ms')),
            60_000,
          ),
        }),
        {
          batchSize: 16,
          maxDequeueCount: 5,
          visibilityTimeout: 0,
          messageEncoding: 'base64',
          maxPollingInterval: 60_000,
        },
      ),
    }),
    {
      queues: { batchSize: 16, maxDequeueCount: 5, visibilityTimeout: 0, messageEncoding: 'base64', maxPollingInterval: 60_000 },
    },
  ),
});

/** The app settings that override host.json, as the Functions host reads them: `AzureFunctionsJobHost__<path>`. */
const OVERRIDE_PREFIX = 'AzureFunctionsJobHost__';
const QUEUE_KEYS = [
  'batchSize',
  'newBatchThreshold',
  'maxDequeueCount',
  'visibilityTimeout',
  'messageEncoding',
  'maxPollingInterval',
];
/** The host.json paths Baton reads that an app setting may override. */
const OVERRIDABLE = [...QUEUE_KEYS.map((key) => ['extensions', 'queues', key]), ['functionTimeout']];

/**
 * host.json with the `AzureFunctionsJobHost__*` app settings for what Baton reads laid over it,
 * as the host does (the deploy sets `extensions__queues__maxDequeueCount` from BATON_MAX_ATTEMPTS
 * that way). Names match without regard to case, as the host's do. `from` maps each overridden
 * path (`extensions.queues.batchSize`) to its setting, so an error can name the setting.
 */
function withOverrides(raw: unknown, env: Record<string, string | undefined>): { raw: unknown; from: Map<string, string> } {
  const from = new Map<string, string>();
  let merged = raw;
  for (const [name, value] of Object.entries(env)) {
    if (value === undefined) continue;
    const path = OVERRIDABLE.find((p) => `${OVERRIDE_PREFIX}${p.join('__')}`.toLowerCase() === name.toLowerCase());
    if (!path) continue;
    from.set(path.join('.'), name);
    // App settings are text; host.json's numbers are numbers.
    merged = withValue(merged, path, /^\d+$/.test(value.trim()) ? Number(value.trim()) : value.trim());
  }
  return { raw: merged, from };
}

/** `node` with `value` at `path`, copied along the path and left alone elsewhere. */
function withValue(node: unknown, [head, ...rest]: string[], value: unknown): Record<string, unknown> {
  const base = typeof node === 'object' && node !== null ? (node as Record<string, unknown>) : {};
  return { ...base, [head!]: rest.length === 0 ? value : withValue(base[head!], rest, value) };
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
    throw new Error(`cannot read ${path}: ${messageOf(err)}`);
  }
  const { raw, from } = withOverrides(fromFile, env);
  const parsed = hostJsonSchema.safeParse(raw);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    const setting = issue ? from.get(issue.path.join('.')) : undefined;
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
