import * as z from '../zod';
import { InvalidConfigError } from '../errors';
import { Schedule } from '../schedule/schedule';
import { TimeZone } from '../schedule/time-zone';
import {
  DEFAULT_HEDGE,
  DEFAULT_MAX_PAYLOAD_BYTES,
  MAX_PAYLOAD_BYTES_LIMIT,
  type JobDefinition,
  type JobOptions,
} from './job-definition';
import { isJobSchema, type JobSchema } from './job-schema';

const payloadBytes = (what: string) =>
  z._default(
    z
      .number({ message: `must be a number of bytes (${what})` })
      .check(
        z.int('must be a whole number of bytes'),
        z.gte(1, 'must be at least 1 byte'),
        z.lte(MAX_PAYLOAD_BYTES_LIMIT, `must be at most ${MAX_PAYLOAD_BYTES_LIMIT} bytes (64 MiB)`),
      ),
    DEFAULT_MAX_PAYLOAD_BYTES,
  );

const hookSeconds = z
  .number({ message: 'must be a number of seconds' })
  .check(z.positive('must be positive'), z.lte(86_400, 'must be at most 86400 (a day)'));

const fn = (what: string) =>
  z.custom<(...args: never[]) => unknown>((v) => typeof v === 'function', { message: `must be a function (${what})` });

// Whatever validation library the app uses, by the interface they share, not by `instanceof`.
const standardSchema = z.custom<JobSchema<unknown>>(isJobSchema, {
  message: 'must be a Standard Schema (zod 3.24 or later, valibot, arktype and others implement it)',
});

const hedgeOptions = () =>
  z.strictObject(
    {
      maxPercent: z._default(
        z
          .number({ message: "must be a percentage of the run's work messages" })
          .check(
            z.gte(0, "must be 0-100 (percent of the run's work messages; 0 turns hedging off)"),
            z.lte(100, "must be 0-100 (percent of the run's work messages; 0 turns hedging off)"),
          ),
        DEFAULT_HEDGE.maxPercent,
      ),
      minWaitSeconds: z._default(
        z
          .number({ message: 'must be a number of seconds' })
          .check(z.gte(0, 'must be 0 or more'), z.lte(86_400, 'must be at most 86400 (a day)')),
        DEFAULT_HEDGE.minWaitSeconds,
      ),
      minCopies: z._default(
        z
          .number({ message: 'must be a number of copies' })
          .check(
            z.int('must be a whole number of copies'),
            z.gte(0, 'must be 0-1000 (copies any run may send, whatever its size)'),
            z.lte(1000, 'must be 0-1000 (copies any run may send, whatever its size)'),
          ),
        DEFAULT_HEDGE.minCopies,
      ),
    },
    {
      error: (issue) =>
        issue.code === 'invalid_type'
          ? 'must be false or { maxPercent, minWaitSeconds, minCopies } (hedged dispatch)'
          : undefined,
    },
  );

const retrySeconds = z
  .number({ message: 'must be a number of seconds' })
  .check(z.gte(0, 'must be 0 or more'), z.lte(3600, 'must be at most 3600 (an hour)'));

const retryOptions = () =>
  z
    .strictObject(
      {
        attempts: z.optional(
          z
            .number({ message: 'must be a number of tries' })
            .check(
              z.int('must be a whole number of tries'),
              z.gte(1, 'must be at least 1 (the first try; 1 means no retry)'),
              z.lte(100, 'must be at most 100'),
            ),
        ),
        delaySeconds: z.optional(retrySeconds),
        backoff: z.optional(
          z
            .number({ message: 'must be a number (each wait is this many times the one before)' })
            .check(z.gte(1, 'must be at least 1 (each wait is this many times the one before)'), z.lte(10, 'must be at most 10')),
        ),
        maxDelaySeconds: z.optional(retrySeconds),
      },
      {
        error: (issue) =>
          issue.code === 'invalid_type'
            ? 'must be { attempts, delaySeconds, backoff, maxDelaySeconds } (item retries)'
            : undefined,
      },
    )
    .check(
      z.refine((r) => r.delaySeconds === undefined || r.maxDelaySeconds === undefined || r.maxDelaySeconds >= r.delaySeconds, {
        message: 'must be at least delaySeconds',
        path: ['maxDelaySeconds'],
      }),
    );

/** A job's name: it names blobs, queues' messages and metrics, so it is kept plain. */
export const JOB_NAME_PATTERN = /^[a-z0-9](?:[a-z0-9-]{0,46}[a-z0-9])?$/;

const wholeSeconds = (fallback: number) =>
  z._default(z.number().check(z.int('must be whole seconds'), z.positive('must be positive')), fallback);

const jobOptionsSchema = z.object({
  name: z
    .string({ message: 'must be a string' })
    .check(z.regex(JOB_NAME_PATTERN, 'must be 1-48 lowercase letters, digits or inner hyphens')),
  schedule: z.string({ message: 'must be an NCRONTAB string' }),
  timeZone: z._default(z.string({ message: 'must be an IANA time zone name, such as "Europe/Berlin"' }), 'UTC'),
  dstGap: z._default(z.enum(['run', 'skip'], { message: "must be 'run' or 'skip'" }), 'run'),
  jitterSeconds: z._default(
    z
      .number()
      .check(z.int('must be whole seconds'), z.gte(0, 'must be 0 or more'), z.lte(3600, 'must be at most 3600 (an hour)')),
    0,
  ),
  overlap: z._default(z.enum(['skip', 'allow', 'replace'], { message: "must be 'skip', 'allow' or 'replace'" }), 'skip'),
  startingDeadlineSeconds: wholeSeconds(300),
  catchUp: z._default(z.enum(['latest', 'all'], { message: "must be 'latest' or 'all'" }), 'latest'),
  timeoutSeconds: wholeSeconds(3600),
  // Options a job leaves out take their defaults as they are, so their schemas are built only for
  // a job that sets them (z.lazy): an app's start builds a zod schema in some 20 µs.
  failureTolerance: z._default(
    z.lazy(() =>
      z.strictObject({
        // The path already names the field: `job x: failureTolerance.count must be 0 or more`.
        count: z.optional(
          z
            .number({ message: 'must be a number of failed items' })
            .check(
              z.int('must be a whole number of failed items'),
              z.nonnegative('must be 0 or more (failed items a run may have and still succeed)'),
            ),
        ),
        percent: z.optional(
          z
            .number({ message: 'must be a percentage' })
            .check(z.gte(0, 'must be 0-100 (percent of planned items)'), z.lte(100, 'must be 0-100 (percent of planned items)')),
        ),
      }),
    ),
    {},
  ),
  itemsPerMessage: z._default(
    z.number().check(z.int('must be a whole number'), z.gte(1, 'must be at least 1'), z.lte(1000, 'must be at most 1000')),
    1,
  ),
  maxItemBytes: payloadBytes('the largest serialized item'),
  maxResultBytes: payloadBytes('the largest serialized result'),
  hookTimeouts: z._default(
    z.lazy(() =>
      z.strictObject({
        splitSeconds: z._default(hookSeconds, 300),
        processSeconds: z._default(hookSeconds, 120),
        finalizeSeconds: z._default(hookSeconds, 300),
        itemFailedSeconds: z._default(hookSeconds, 30),
        graceSeconds: z._default(
          z
            .number({ message: 'must be a number of seconds' })
            .check(z.gte(0, 'must be 0 or more'), z.lte(600, 'must be at most 600')),
          10,
        ),
        maxSplitTimeouts: z._default(
          z.number().check(z.int('must be a whole number'), z.gte(1, 'must be at least 1'), z.lte(100, 'must be at most 100')),
          3,
        ),
      }),
    ),
    {
      splitSeconds: 300,
      processSeconds: 120,
      finalizeSeconds: 300,
      itemFailedSeconds: 30,
      graceSeconds: 10,
      maxSplitTimeouts: 3,
    },
  ),
  // `false` is `maxPercent: 0`, so a bad field is named by its own path (`hedge.maxPercent`).
  hedge: z._default(
    z.lazy(() =>
      z.pipe(
        z.transform((v: unknown) => (v === false ? { maxPercent: 0 } : (v ?? {}))),
        hedgeOptions(),
      ),
    ),
    () => ({ ...DEFAULT_HEDGE }),
  ),
  retry: z._default(
    z.lazy(() => retryOptions()),
    {},
  ),
  split: fn('split(ctx) returns the items'),
  process: fn('process(item, ctx) returns the result'),
  aggregate: z.object({
    initial: fn('aggregate.initial() returns the empty accumulator'),
    add: fn('aggregate.add(acc, result, ref) folds one result'),
    output: z.optional(fn('aggregate.output(acc)')),
    merge: z.optional(fn('aggregate.merge(a, b) folds two accumulators into one')),
  }),
  finalize: z.optional(fn('finalize(output, ctx)')),
  onItemFailed: z.optional(fn('onItemFailed(failure, ctx) is told of one failed item')),
  itemSchema: z.optional(standardSchema),
  resultSchema: z.optional(standardSchema),
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
  const zone = TimeZone.of(value.timeZone, `${label}.timeZone`);
  const schedule = Schedule.parse(value.schedule, `${label}.schedule`, zone);
  if (value.jitterSeconds > 0) {
    // A start jittered past the next occurrence would reorder the job's runs.
    const gapMs = schedule.shortestGapMs(new Date());
    if (gapMs !== undefined && value.jitterSeconds * 1000 >= gapMs) {
      throw new InvalidConfigError(
        `${label}.jitterSeconds`,
        `job ${label}: jitterSeconds (${value.jitterSeconds}) must be shorter than the schedule's shortest gap between occurrences (${gapMs / 1000} s)`,
      );
    }
  }
  const aggregate = options.aggregate;
  return Object.freeze({
    name: value.name,
    schedule: value.schedule,
    timeZone: zone.name,
    dstGap: value.dstGap,
    jitterSeconds: value.jitterSeconds,
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
