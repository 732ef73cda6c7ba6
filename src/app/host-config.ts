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
}

const timespan = z
  .string()
  .regex(/^(\d+):(\d{2}):(\d{2})$/, 'must be a hh:mm:ss time span')
  .transform((value) => {
    const [h, m, s] = value.split(':').map(Number) as [number, number, number];
    return h * 3600 + m * 60 + s;
  });

const hostJsonSchema = z.object({
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

/** Reads the queue settings from a host.json; a malformed one fails with the path and the problem. */
export function readHostQueueConfig(path = 'host.json'): HostQueueConfig {
  let raw: unknown;
  try {
    raw = JSON.parse(readFileSync(path, 'utf8'));
  } catch (err) {
    throw new Error(`cannot read ${path}: ${err instanceof Error ? err.message : String(err)}`);
  }
  const parsed = hostJsonSchema.safeParse(raw);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    throw new Error(`${path}: ${issue?.path.join('.') ?? ''} ${issue?.message ?? 'is invalid'}`.trim());
  }
  const q = parsed.data.extensions.queues;
  return {
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
