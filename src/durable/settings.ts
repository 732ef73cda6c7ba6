import type * as df from 'durable-functions';
import * as z from '../zod';
import { InvalidConfigError } from '../errors';
import { lazily } from '../storage/setting';
import type { ItemRetryOptions } from '../jobs/retry-policy';
import { durableFunctions } from './durable-functions';

/**
 * How a durable run fans out and retries. The starter copies the whole set into the run's
 * input, so a run keeps the settings it started with: an orchestrator must make the same
 * decisions on every replay, even after a deploy changes the defaults.
 */
export interface DurableRunSettings {
  /** Items per chunk sub-orchestration (rounded down to whole messages, at least one message). Default 500. */
  chunkItems: number;
  /** Tries of each message: all but the last under Durable's retry policy, the last reports per item. Default 5. */
  maxAttempts: number;
  /** Wait before the first retry. Default 1 s. */
  firstRetryIntervalMs: number;
  /** Each wait is this many times the one before. Default 2. */
  backoffCoefficient: number;
  /** Longest wait between tries. Default 60 s. */
  maxRetryIntervalMs: number;
}

export const DEFAULT_DURABLE_SETTINGS: DurableRunSettings = Object.freeze({
  chunkItems: 500,
  maxAttempts: 5,
  firstRetryIntervalMs: 1000,
  backoffCoefficient: 2,
  maxRetryIntervalMs: 60_000,
});

// Built on first use: an app on the queue engine never needs it (see `lazily`).
export const durableSettingsSchema = lazily(() =>
  z.strictObject({
    chunkItems: z
      .number()
      .check(z.int('must be a whole number of items'), z.gte(1, 'must be at least 1'), z.lte(100_000, 'must be at most 100000')),
    maxAttempts: z
      .number()
      .check(z.int('must be a whole number'), z.gte(1, 'must be at least 1'), z.lte(100, 'must be at most 100')),
    firstRetryIntervalMs: z.number().check(z.int('must be whole milliseconds'), z.positive('must be positive')),
    backoffCoefficient: z.number().check(z.gte(1, 'must be at least 1')),
    maxRetryIntervalMs: z.number().check(z.int('must be whole milliseconds'), z.positive('must be positive')),
  }),
);

/** Fills in defaults and checks every field; a bad one throws `InvalidConfigError` naming `durable.<field>`. */
export function resolveDurableSettings(partial: Partial<DurableRunSettings> = {}): DurableRunSettings {
  const parsed = durableSettingsSchema().safeParse({ ...DEFAULT_DURABLE_SETTINGS, ...partial });
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    const path = issue?.path.join('.') || 'settings';
    throw new InvalidConfigError(`durable.${path}`, `durable engine: ${path} ${issue?.message ?? 'is invalid'}`);
  }
  return parsed.data;
}

/**
 * Items per chunk: whole messages only, so no message spans two chunks (or two plan blobs),
 * and never less than one message even when a message holds more than `chunkItems`.
 */
export function chunkItemsFor(settings: DurableRunSettings, itemsPerMessage: number): number {
  return Math.max(1, Math.floor(settings.chunkItems / itemsPerMessage)) * itemsPerMessage;
}

/**
 * A job's runs: the deployment's settings with what the job's own `retry` option sets over them
 * (the queue engine reads the same option). Durable waits at least 1 ms between tries.
 */
export function durableSettingsFor(settings: DurableRunSettings, retry: Readonly<ItemRetryOptions>): DurableRunSettings {
  const ms = (seconds: number) => Math.max(1, Math.round(seconds * 1000));
  return {
    ...settings,
    ...(retry.attempts === undefined ? {} : { maxAttempts: retry.attempts }),
    ...(retry.delaySeconds === undefined ? {} : { firstRetryIntervalMs: ms(retry.delaySeconds) }),
    ...(retry.backoff === undefined ? {} : { backoffCoefficient: retry.backoff }),
    ...(retry.maxDelaySeconds === undefined ? {} : { maxRetryIntervalMs: ms(retry.maxDelaySeconds) }),
  };
}

/** Durable's retry policy for `attempts` tries with the run's backoff. */
export function retryOptions(settings: DurableRunSettings, attempts: number): df.RetryOptions {
  const options = new (durableFunctions().RetryOptions)(settings.firstRetryIntervalMs, attempts);
  options.backoffCoefficient = settings.backoffCoefficient;
  options.maxRetryIntervalInMilliseconds = settings.maxRetryIntervalMs;
  return options;
}
