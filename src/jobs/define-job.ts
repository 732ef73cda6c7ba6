import * as z from 'zod';
import { InvalidConfigError } from '../errors';
import { Schedule } from '../schedule/schedule';
import {
  DEFAULT_HEDGE,
  DEFAULT_MAX_PAYLOAD_BYTES,
  MAX_PAYLOAD_BYTES_LIMIT,
  type JobDefinition,
  type JobOptions,
} from './job-definition';
import { isJobSchema, type JobSchema } from './job-schema';

const payloadBytes = (what: string) =>
  z
    .number({ message: `must be a number of bytes (${what})` })
    .int('must be a whole number of bytes')
    .min(1, 'must be at least 1 byte')
    .max(MAX_PAYLOAD_BYTES_LIMIT, `must be at most ${MAX_PAYLOAD_BYTES_LIMIT} bytes (64 MiB)`)
    .default(DEFAULT_MAX_PAYLOAD_BYTES);

const hookSeconds = z
  .number({ message: 'must be a number of seconds' })
  .positive('must be positive')
  .max(86_400, 'must be at most 86400 (a day)');

const fn = (what: string) =>
  z.custom<(...args: never[]) => unknown>((v) => typeof v === 'function', { message: `must be a function (${what})` });

// Whatever validation library the app uses, by the interface they share, not by `instanceof`.
const standardSchema = z.custom<JobSchema<unknown>>(isJobSchema, {
  message: 'must be a Standard Schema (zod 3.24 or later, valibot, arktype and others implement it)',
});

const hedgeOptions = z
  .object(
    {
      maxPercent: z
        .number({ message: "must be a percentage of the run's work messages" })
        .min(0, "must be 0-100 (percent of the run's work messages; 0 turns hedging off)")
        .max(100, "must be 0-100 (percent of the run's work messages; 0 turns hedging off)")
        .default(DEFAULT_HEDGE.maxPercent),
      minWaitSeconds: z
        .number({ message: 'must be a number of seconds' })
        .min(0, 'must be 0 or more')
        .max(86_400, 'must be at most 86400 (a day)')
        .default(DEFAULT_HEDGE.minWaitSeconds),
      minCopies: z
        .number({ message: 'must be a number of copies' })
        .int('must be a whole number of copies')
        .min(0, 'must be 0-1000 (copies any run may send, whatever its size)')
        .max(1000, 'must be 0-1000 (copies any run may send, whatever its size)')
        .default(DEFAULT_HEDGE.minCopies),
    },
    {
      error: (issue) =>
        issue.code === 'invalid_type'
          ? 'must be false or { maxPercent, minWaitSeconds, minCopies } (hedged dispatch)'
          : undefined,
    },
  )
  .strict();

const retrySeconds = z
  .number({ message: 'must be a number of seconds' })
  .min(0, 'must be 0 or more')
  .max(3600, 'must be at most 3600 (an hour)');

const retryOptions = z
  .object(
    {
      attempts: z
        .number({ message: 'must be a number of tries' })
        .int('must be a whole number of tries')
        .min(1, 'must be at least 1 (the first try; 1 means no retry)')
        .max(100, 'must be at most 100')
        .optional(),
      delaySeconds: retrySeconds.optional(),
      backoff: z
        .number({ message: 'must be a number (each wait is this many times the one before)' })
        .min(1, 'must be at least 1 (each wait is this many times the one before)')
        .max(10, 'must be at most 10')
        .optional(),
      maxDelaySeconds: retrySeconds.optional(),
    },
    {
      error: (issue) =>
        issue.code === 'invalid_type' ? 'must be { attempts, delaySeconds, backoff, maxDelaySeconds } (item retries)' : undefined,
    },
  )
  .strict()
  .refine((r) => r.delaySeconds === undefined || r.maxDelaySeconds === undefined || r.maxDelaySeconds >= r.delaySeconds, {
    message: 'must be at least delaySeconds',
    path: ['maxDelaySeconds'],
  });

/** A job's name: it names blobs, queues' messages and metrics, so it is kept plain. */
export const JOB_NAME_PATTERN = /^[a-z0-9](?:[a-z0-9-]{0,46}[a-z0-9])?$/;

const jobOptionsSchema = z.object({
  name: z
    .string({ message: 'must be a string' })
    .regex(JOB_NAME_PATTERN, 'must be 1-48 lowercase letters, digits or inner hyphens'),
  schedule: z.string({ message: 'must be an NCRONTAB string' }),
  overlap: z.enum(['skip', 'allow', 'replace'], { message: "must be 'skip', 'allow' or 'replace'" }).default('skip'),
  startingDeadlineSeconds: z.number().int('must be whole seconds').positive('must be positive').default(300),
  catchUp: z.enum(['latest', 'all'], { message: "must be 'latest' or 'all'" }).default('latest'),
  timeoutSeconds: z.number().int('must be whole seconds').positive('must be positive').default(3600),
  failureTolerance: z
    .object({
      // The path already names the field: `job x: failureTolerance.count must be 0 or more`.
      count: z
        .number({ message: 'must be a number of failed items' })
        .int('must be a whole number of failed items')
        .nonnegative('must be 0 or more (failed items a run may have and still succeed)')
        .optional(),
      percent: z
        .number({ message: 'must be a percentage' })
        .min(0, 'must be 0-100 (percent of planned items)')
        .max(100, 'must be 0-100 (percent of planned items)')
        .optional(),
    })
    .strict()
    .default({}),
  itemsPerMessage: z
    .number()
    .int('must be a whole number')
    .min(1, 'must be at least 1')
    .max(1000, 'must be at most 1000')
    .default(1),
  maxItemBytes: payloadBytes('the largest serialized item'),
  maxResultBytes: payloadBytes('the largest serialized result'),
  hookTimeouts: z
    .object({
      splitSeconds: hookSeconds.default(300),
      processSeconds: hookSeconds.default(120),
      finalizeSeconds: hookSeconds.default(300),
      itemFailedSeconds: hookSeconds.default(30),
      graceSeconds: z
        .number({ message: 'must be a number of seconds' })
        .min(0, 'must be 0 or more')
        .max(600, 'must be at most 600')
        .default(10),
      maxSplitTimeouts: z
        .number()
        .int('must be a whole number')
        .min(1, 'must be at least 1')
        .max(100, 'must be at most 100')
        .default(3),
    })
    .strict()
    .default({
      splitSeconds: 300,
      processSeconds: 120,
      finalizeSeconds: 300,
      itemFailedSeconds: 30,
      graceSeconds: 10,
      maxSplitTimeouts: 3,
    }),
  // `false` is `maxPercent: 0`, so a bad field is named by its own path (`hedge.maxPercent`).
  hedge: z.preprocess((v) => (v === false ? { maxPercent: 0 } : (v ?? {})), hedgeOptions),
  retry: retryOptions.default({}),
  split: fn('split(ctx) returns the items'),
  process: fn('process(item, ctx) returns the result'),
  aggregate: z.object({
    initial: fn('aggregate.initial() returns the empty accumulator'),
    add: fn('aggregate.add(acc, result, ref) folds one result'),
    output: fn('aggregate.output(acc)').optional(),
    merge: fn('aggregate.merge(a, b) folds two accumulators into one').optional(),
  }),
  finalize: fn('finalize(output, ctx)').optional(),
  onItemFailed: fn('onItemFailed(failure, ctx) is told of one failed item').optional(),
  itemSchema: standardSchema.optional(),
  resultSchema: standardSchema.optional(),
});

/**
 * Declares a job. Every option is checked here, at start-up: the first broken rule throws an
 * `InvalidConfigError` whose `option` is `<job>.<path>` and whose message is one line.
 */
export function defineJob<Item, Result, Acc, Output = Acc>(
  options: JobOptions<Item, Result, Acc, Output>,
): JobDefinition<Item, Result, Acc, Output> {
  const parsed = jobOptionsSchema.safeParse(options);
  const label = typeof options?.name === 'string' && options.name ? options.name : 'job';
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    const path = issue?.path.length ? issue.path.join('.') : 'options';
    throw new InvalidConfigError(`${label}.${path}`, `job ${label}: ${path} ${issue?.message ?? 'is invalid'}`);
  }
  const value = parsed.data;
  Schedule.parse(value.schedule, `${label}.schedule`);
  const aggregate = options.aggregate;
  return Object.freeze({
    name: value.name,
    schedule: value.schedule,
    overlap: value.overlap,
    startingDeadlineSeconds: value.startingDeadlineSeconds,
    catchUp: value.catchUp,
    timeoutSeconds: value.timeoutSeconds,
    failureTolerance: value.failureTolerance,
    itemsPerMessage: value.itemsPerMessage,
    maxItemBytes: value.maxItemBytes,
    maxResultBytes: value.maxResultBytes,
    hookTimeouts: Object.freeze({ ...value.hookTimeouts }),
    hedge: value.hedge.maxPercent > 0 ? Object.freeze({ ...value.hedge }) : false,
    // Only the fields set, so an engine's defaults fill the rest.
    retry: Object.freeze(Object.fromEntries(Object.entries(value.retry).filter(([, v]) => v !== undefined))),
    split: options.split,
    process: options.process,
    aggregate: {
      initial: () => aggregate.initial(),
      add: (acc: Acc, result: Result, ref: { itemIndex: number }) => aggregate.add(acc, result, ref),
      output: (acc: Acc) => (aggregate.output ? aggregate.output(acc) : (acc as unknown as Output)),
      ...(aggregate.merge ? { merge: (a: Acc, b: Acc) => aggregate.merge!(a, b) } : {}),
    },
    ...(options.finalize ? { finalize: options.finalize } : {}),
    ...(options.onItemFailed ? { onItemFailed: options.onItemFailed } : {}),
    ...(options.itemSchema ? { itemSchema: options.itemSchema } : {}),
    ...(options.resultSchema ? { resultSchema: options.resultSchema } : {}),
  });
}

/** Checks that job names are unique across the registration list. */
export function assertUniqueJobs(jobs: readonly JobDefinition[]): void {
  const seen = new Set<string>();
  for (const job of jobs) {
    if (seen.has(job.name)) throw new InvalidConfigError(`${job.name}.name`, `job name ${job.name} is registered twice`);
    seen.add(job.name);
  }
}
