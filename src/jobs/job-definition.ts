import type { JobSchema } from './job-schema';
import type { ItemRetryOptions } from './retry-policy';

/** Default of `maxItemBytes` and `maxResultBytes`: 1 MiB of JSON (UTF-8). */
export const DEFAULT_MAX_PAYLOAD_BYTES = 1024 * 1024;
/** The most either limit may be set to. */
export const MAX_PAYLOAD_BYTES_LIMIT = 64 * 1024 * 1024;

export type OverlapPolicyName = 'skip' | 'allow' | 'replace';

/** Where a result came from; the fold gets it so failures and outputs can name items. */
export interface ItemRef {
  itemIndex: number;
}

export interface SplitContext {
  runId: string;
  /** The scheduled occurrence, or undefined for a manual run. */
  occurrence: Date | undefined;
  signal: AbortSignal;
}

export interface ProcessContext {
  runId: string;
  itemIndex: number;
  /**
   * 1 on the item's first try, then 2, 3, … up to the job's `retry.attempts`. A redelivery of the
   * same message (its worker died) counts as a try too.
   */
  attempt: number;
  signal: AbortSignal;
}

export interface FinalizeContext {
  runId: string;
  /** The same on every call for one run: use it to make the hook's side effects idempotent. */
  idempotencyKey: string;
  state: 'succeeded' | 'failed';
  counters: RunCountersView;
  signal: AbortSignal;
  /**
   * Keeps a small text file with the run, beside its output (`runs/<run>/attachments/<name>`), for
   * a person to read: a report, a summary. Written once: when `finalize` runs again for the same
   * run, the first file stays. `baton start --once` prints an attachment named `report.md`.
   * `name` is 1–100 letters, digits, `.`, `_` or `-`, starting with a letter or digit.
   */
  attach(name: string, text: string): Promise<void>;
}

/** A failed item as `onItemFailed` is told of it: the entry the run's failure log keeps. */
export interface ItemFailure {
  /** The item's index in the run's plan. */
  item: number;
  /** Why it failed: short, secrets masked, as `baton failures` prints it. */
  reason: string;
  /** Attempts the item had when it failed. */
  attempts: number;
}

export interface ItemFailedContext {
  runId: string;
  job: string;
  /** Aborts at `hookTimeouts.itemFailedSeconds`. */
  signal: AbortSignal;
}

export interface RunCountersView {
  planned: number;
  succeeded: number;
  failed: number;
}

/**
 * The fold that turns results into one output. `add` is called once per item that counts
 * (duplicates never reach it), in whatever order results arrive, so the final accumulator
 * must not depend on order: sums, counts, min/max, sets and sorted top-k are fine; "the last
 * one wins" is not. The accumulator is checkpointed as JSON, so keep it JSON and small.
 */
export interface Aggregate<Result, Acc, Output> {
  initial(): Acc;
  add(acc: Acc, result: Result, ref: ItemRef): Acc;
  /** Turns the accumulator into the output written at the end. Default: the accumulator. */
  output?(acc: Acc): Output;
  /**
   * Required for the durable engine: folds two accumulators of disjoint item sets; must be
   * associative and agree with add (`merge(fold(A), fold(B))` equals folding A and B together).
   */
  merge?(a: Acc, b: Acc): Acc;
}

export interface FailureTolerance {
  /** At most this many failed items. */
  count?: number;
  /** At most this percentage (0–100) of planned items failed. */
  percent?: number;
}

/**
 * Time bounds on the job's hooks. Past its bound a hook's `signal` aborts; a hook that ignores
 * it is waited for `graceSeconds` more and then abandoned (it may go on running, unawaited).
 */
export interface HookTimeouts {
  /** Longest wait for `split` to give its next item (or to end). Default 300. */
  splitSeconds?: number;
  /** Longest one `process` call may take; past it that attempt of the item fails. Default 120. */
  processSeconds?: number;
  /** Longest `finalize` may take; past it the run ends with `finalizeError` saying so. Default 300. */
  finalizeSeconds?: number;
  /** Longest one `onItemFailed` call may take; past it the call is given up. Default 30. */
  itemFailedSeconds?: number;
  /** How long a hook whose signal aborted is still waited for. Default 10. */
  graceSeconds?: number;
  /** Split timeouts after which the run ends failed instead of planning again. Default 3. */
  maxSplitTimeouts?: number;
}

/**
 * Hedged dispatch: the leader sends a copy of a work message that waits much longer than the
 * run's messages usually take (a worker paused, killed or hung while it holds it), and the first
 * result to arrive counts; the others are duplicates. `false` (or `maxPercent: 0`) turns it off.
 */
export interface HedgeOptions {
  /**
   * The most copies a run sends, as a percentage of its work messages, rounded up: with the
   * default 5, a run of 1,000 messages sends at most 50 copies, and a run of one message at most
   * one. 0 to 100.
   */
  maxPercent?: number;
  /** No copy of a message before it has waited this long, however fast the run's items are. Default 5. */
  minWaitSeconds?: number;
  /**
   * However few messages a run has, it may send this many copies (at most one per message), so
   * that one stopped instance's whole batch can be copied. Default 24: what one instance holds at
   * most under the shipped host.json (`batchSize` 16 plus `newBatchThreshold` 8). 0 to 1000.
   */
  minCopies?: number;
}

/** What `defineJob` takes. */
export interface JobOptions<Item, Result, Acc, Output> {
  /** Lowercase letters, digits and hyphens; part of run ids and blob paths. */
  name: string;
  /** NCRONTAB with seconds (6 fields, as Azure Functions timers use) or classic 5-field cron, read in `timeZone`. */
  schedule: string;
  /**
   * The IANA time zone whose wall clock `schedule` reads, such as `Europe/Berlin`. Default `UTC`.
   * On the days the clocks change, each wall time runs once: a time the clocks go back over, at
   * its first instant; a time they skip, at the first instant after the gap, unless `dstGap`
   * says `skip` (docs/jobs.md).
   */
  timeZone?: string;
  /**
   * What becomes of a wall time that does not happen because the clocks skip it (spring
   * forward): `run` (the default) runs it once, at the first instant after the gap; `skip`
   * records it as skipped, with its reason, and does not run it.
   */
  dstGap?: 'run' | 'skip';
  /**
   * Spreads each occurrence's start over this many seconds after it (0 to 3600, shorter than the
   * schedule's shortest gap), by a hash of the job and the occurrence: every leader computes the
   * same start, and start lag counts from it. Default 0. For many jobs due at the same instant.
   */
  jitterSeconds?: number;
  /** What to do when an occurrence comes while a run of this job is active. Default `skip`. */
  overlap?: OverlapPolicyName;
  /** An occurrence older than this when the leader sees it is recorded as missed. Default 300. */
  startingDeadlineSeconds?: number;
  /** After an outage: run only the latest due occurrence (default) or all of them. */
  catchUp?: 'latest' | 'all';
  /** A run still open this long after it was created ends timed-out. Default 3600. */
  timeoutSeconds?: number;
  /** How many failed items a run may have and still succeed. Default none. */
  failureTolerance?: FailureTolerance;
  /** Items packed into one queue message. Default 1. */
  itemsPerMessage?: number;
  /**
   * Largest item, as serialized JSON (UTF-8 bytes). Default 1 MiB, at most 64 MiB. A bigger item
   * fails the run while planning, naming its index; a worker fails one it is handed.
   */
  maxItemBytes?: number;
  /**
   * Largest result, as serialized JSON (UTF-8 bytes). Default 1 MiB, at most 64 MiB. A bigger result
   * is reported as that item's failure (by the worker, and again by the leader before folding).
   */
  maxResultBytes?: number;
  /** Time bounds on `split`, `process` and `finalize`; see `HookTimeouts` for the defaults. */
  hookTimeouts?: HookTimeouts;
  /**
   * Copies of a straggler's work message (queue engine only). Default
   * `{ maxPercent: 5, minWaitSeconds: 5, minCopies: 24 }`; `false` turns it off. See `HedgeOptions`.
   */
  hedge?: false | HedgeOptions;
  /**
   * How often and how soon an item whose `process` fails is tried again. Default: the
   * deployment's attempts (5), waiting 1 s, then twice as long each time, at most 60 s. See
   * `ItemRetryOptions`.
   */
  retry?: ItemRetryOptions;
  /**
   * Gives the items. A leader that takes over mid-plan calls it again and skips the items
   * already persisted, so for one run it must give the same items in the same order.
   */
  split(ctx: SplitContext): Iterable<Item> | AsyncIterable<Item>;
  process(item: Item, ctx: ProcessContext): Promise<Result> | Result;
  aggregate: Aggregate<Result, Acc, Output>;
  finalize?(output: Output, ctx: FinalizeContext): Promise<void> | void;
  /**
   * Told of each failed item by the leader once its checkpoint has landed (queue engine only):
   * **at most once** per item, never for a duplicate, retry, hedged copy or new leader, and lost
   * if the leader stops before the call. Bounded by `hookTimeouts.itemFailedSeconds`; what it
   * throws is logged and never harms the run. See docs/jobs.md.
   */
  onItemFailed?(failure: ItemFailure, ctx: ItemFailedContext): Promise<void> | void;
  /**
   * Checked before `process` (worker) and when planning (leader). Any Standard Schema: zod
   * (3.24 and later, 4, mini), valibot, arktype; it must validate synchronously.
   */
  itemSchema?: JobSchema<Item>;
  /** Checked after `process` (worker) and before folding (leader); a Standard Schema, as `itemSchema`. */
  resultSchema?: JobSchema<Result>;
}

/** A validated job, with every default filled in. */
export interface JobDefinition<Item = unknown, Result = unknown, Acc = unknown, Output = unknown> {
  readonly name: string;
  readonly schedule: string;
  /** The zone's canonical IANA name; `UTC` when the job named none. */
  readonly timeZone: string;
  /** `run` unless the job said `skip`; a definition made by hand may leave it out (then `run`). */
  readonly dstGap?: 'run' | 'skip';
  readonly jitterSeconds: number;
  readonly overlap: OverlapPolicyName;
  readonly startingDeadlineSeconds: number;
  readonly catchUp: 'latest' | 'all';
  readonly timeoutSeconds: number;
  readonly failureTolerance: FailureTolerance;
  readonly itemsPerMessage: number;
  readonly maxItemBytes: number;
  readonly maxResultBytes: number;
  readonly hookTimeouts: Readonly<Required<HookTimeouts>>;
  /** Hedged dispatch, or `false` when it is off (`maxPercent: 0` is `false` here). */
  readonly hedge: false | Readonly<Required<HedgeOptions>>;
  /** Only what the job set: each engine fills in its deployment's defaults (`retryScheduleOf`). */
  readonly retry: Readonly<ItemRetryOptions>;
  split(ctx: SplitContext): Iterable<Item> | AsyncIterable<Item>;
  process(item: Item, ctx: ProcessContext): Promise<Result> | Result;
  /** `merge` stays optional: only the durable engine needs it (see `assertDurableReady`). */
  readonly aggregate: Required<Omit<Aggregate<Result, Acc, Output>, 'merge'>> & Pick<Aggregate<Result, Acc, Output>, 'merge'>;
  finalize?(output: Output, ctx: FinalizeContext): Promise<void> | void;
  onItemFailed?(failure: ItemFailure, ctx: ItemFailedContext): Promise<void> | void;
  readonly itemSchema?: JobSchema<Item>;
  readonly resultSchema?: JobSchema<Result>;
}

/** Defaults of `HedgeOptions`. */
export const DEFAULT_HEDGE: Readonly<Required<HedgeOptions>> = Object.freeze({ maxPercent: 5, minWaitSeconds: 5, minCopies: 24 });

/** Whether a run with these counts is within the job's tolerance. With none set, any failure fails it. */
export function withinTolerance(tolerance: FailureTolerance, planned: number, failed: number): boolean {
  if (failed === 0) return true;
  const { count, percent } = tolerance;
  if (count === undefined && percent === undefined) return false;
  if (count !== undefined && failed > count) return false;
  if (percent !== undefined && planned > 0 && (failed / planned) * 100 > percent) return false;
  return true;
}
