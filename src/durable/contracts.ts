import * as z from '../zod';
import { RUN_STATES } from '../hub/run-record';
import { durableSettingsSchema } from './settings';

/**
 * What the orchestrations and activities pass each other. Durable stores every one of these
 * in a history, so they stay small and plain JSON: items travel in the plan blobs, never here.
 * Each receiver parses what it gets, so a payload from another version fails with a reason.
 */

const counts = z.lazy(() =>
  z.object({
    planned: z.int().check(z.nonnegative()),
    succeeded: z.int().check(z.nonnegative()),
    failed: z.int().check(z.nonnegative()),
  }),
);
export type DurableCounts = z.infer<typeof counts>;

export const failureEntrySchema = z.lazy(() =>
  z.object({
    item: z.int().check(z.nonnegative()),
    reason: z.string(),
    /** 0 when unknown: the item's chunk failed as a whole. */
    attempts: z.int().check(z.nonnegative()),
  }),
);

/** The run orchestration's input, as the starter (or a manual trigger) writes it. */
export const runInputSchema = z.lazy(() =>
  z.object({
    runId: z.string().check(z.minLength(1)),
    job: z.string().check(z.minLength(1)),
    occurrence: z.nullable(z.string()),
    trigger: z.enum(['schedule', 'manual']),
    /** Missing fields take the defaults; the starter always writes them all. */
    settings: z.optional(z.partial(durableSettingsSchema())),
  }),
);
export type RunInput = z.infer<typeof runInputSchema>;

/** `customStatus` of a run orchestration: items with an outcome (`done`, failures included), failed, planned. */
export interface RunProgress {
  done: number;
  failed: number;
  total: number;
}

export const splitInputSchema = z.lazy(() =>
  z.object({
    runId: z.string().check(z.minLength(1)),
    job: z.string().check(z.minLength(1)),
    occurrence: z.nullable(z.string()),
    trigger: z.enum(['schedule', 'manual']),
    /** The settings' chunk size; the activity rounds it to whole messages. */
    chunkItems: z.int().check(z.positive()),
  }),
);
export type SplitInput = z.infer<typeof splitInputSchema>;

/** What the finalize activity, and so the run orchestration, returns. */
export const runResultSchema = z.lazy(() =>
  z.object({
    runId: z.string(),
    state: z.enum(RUN_STATES),
    counts,
    outputKey: z.nullable(z.string()),
    manifestKey: z.nullable(z.string()),
  }),
);
export type RunResult = z.infer<typeof runResultSchema>;

export const splitResultSchema = z.lazy(() =>
  z.discriminatedUnion('kind', [
    z.object({
      kind: z.literal('planned'),
      planned: z.int().check(z.nonnegative()),
      /** The plan's directory (`plan/e<planEpoch>/`), one per split attempt. */
      planEpoch: z.int().check(z.nonnegative()),
      /** Items per plan blob and per chunk (whole messages). */
      chunkItems: z.int().check(z.positive()),
      chunks: z.int().check(z.nonnegative()),
    }),
    /** `split` threw or yielded a bad item; the record says failed with the reason. */
    z.object({ kind: z.literal('failed'), reason: z.string() }),
    /** The run had already ended (an orchestration restarted for an old occurrence): nothing to do. */
    z.object({ kind: z.literal('ended'), result: runResultSchema }),
  ]),
);
export type SplitResult = z.infer<typeof splitResultSchema>;

export const chunkInputSchema = z.lazy(() =>
  z.object({
    runId: z.string().check(z.minLength(1)),
    job: z.string().check(z.minLength(1)),
    planEpoch: z.int().check(z.nonnegative()),
    chunkItems: z.int().check(z.positive()),
    chunk: z.int().check(z.nonnegative()),
    /** The chunk's first item index and item count. */
    first: z.int().check(z.nonnegative()),
    count: z.int().check(z.positive()),
    itemsPerMessage: z.int().check(z.positive()),
    settings: durableSettingsSchema(),
  }),
);
export type ChunkInput = z.infer<typeof chunkInputSchema>;

export const chunkResultSchema = z.lazy(() =>
  z.object({
    /** The chunk's items folded with `aggregate.add`, from `aggregate.initial()`. */
    acc: z.unknown(),
    succeeded: z.int().check(z.nonnegative()),
    failed: z.int().check(z.nonnegative()),
    failures: z.array(failureEntrySchema),
    /** The earliest `doneAt` of the chunk's activities: when its first items had outcomes. */
    firstDoneAt: z.optional(z.string()),
  }),
);
export type ChunkResult = z.infer<typeof chunkResultSchema>;

export const processInputSchema = z.lazy(() =>
  z.object({
    runId: z.string().check(z.minLength(1)),
    job: z.string().check(z.minLength(1)),
    planEpoch: z.int().check(z.nonnegative()),
    chunkItems: z.int().check(z.positive()),
    first: z.int().check(z.nonnegative()),
    count: z.int().check(z.positive()),
    /**
     * false: throw when any item fails, so Durable's retry policy tries the message again.
     * true (the last try): report each item's outcome, failures included, and never throw for one.
     */
    final: z.boolean(),
    /**
     * What `process` sees as `ctx.attempt`. Durable re-sends the same input on each retry, so
     * the tries under the retry policy all see 1; the last, reporting try sees `maxAttempts`.
     */
    attempt: z.int().check(z.positive()),
  }),
);
export type ProcessInput = z.infer<typeof processInputSchema>;

export const itemOutcomeSchema = z.lazy(() =>
  z.discriminatedUnion('ok', [
    z.object({ i: z.int().check(z.nonnegative()), ok: z.literal(true), r: z.unknown() }),
    z.object({ i: z.int().check(z.nonnegative()), ok: z.literal(false), e: z.string(), a: z.int().check(z.positive()) }),
  ]),
);
export const processOutputSchema = z.lazy(() =>
  z.object({
    outcomes: z.array(itemOutcomeSchema),
    /** When the activity had its items' outcomes (storage time); absent from an older version's. */
    doneAt: z.optional(z.string()),
  }),
);
export type ProcessOutput = z.infer<typeof processOutputSchema>;

export const finalizeInputSchema = z.lazy(() =>
  z.discriminatedUnion('kind', [
    z.object({
      kind: z.literal('complete'),
      runId: z.string().check(z.minLength(1)),
      job: z.string().check(z.minLength(1)),
      /** Every chunk's accumulator merged, in chunk order. */
      acc: z.unknown(),
      counts,
      failures: z.array(failureEntrySchema),
      /** The earliest of the chunks' `firstDoneAt`: the run's first-item time. */
      firstItemAt: z.optional(z.string()),
    }),
    /** The run cannot go on (its split activity kept failing): end it failed with the reason. */
    z.object({
      kind: z.literal('abort'),
      runId: z.string().check(z.minLength(1)),
      job: z.string().check(z.minLength(1)),
      reason: z.string(),
    }),
  ]),
);
export type FinalizeInput = z.infer<typeof finalizeInputSchema>;
