import * as z from '../zod';

/** Where a run is: four open states on the forward path, then one of the four ends. */
export type RunState = 'planning' | 'dispatching' | 'running' | 'finalizing' | TerminalRunState;
/** How a run ended. */
export type TerminalRunState = 'succeeded' | 'failed' | 'cancelled' | 'timed-out';

export const RUN_STATES = [
  'planning',
  'dispatching',
  'running',
  'finalizing',
  'succeeded',
  'failed',
  'cancelled',
  'timed-out',
] as const satisfies readonly RunState[];

export function isTerminal(state: RunState): state is TerminalRunState {
  return state === 'succeeded' || state === 'failed' || state === 'cancelled' || state === 'timed-out';
}

/**
 * The forward path. Cancelled, timed-out and failed can also end any open state: failed is how
 * a run ends that cannot go on (its split throws, its plan is gone, a step keeps failing).
 */
const NEXT: Record<RunState, readonly RunState[]> = {
  planning: ['dispatching', 'failed'],
  dispatching: ['running', 'failed'],
  running: ['finalizing', 'failed'],
  finalizing: ['succeeded', 'failed'],
  succeeded: [],
  failed: [],
  cancelled: [],
  'timed-out': [],
};

export function canTransition(from: RunState, to: RunState): boolean {
  if (isTerminal(from)) return false;
  return to === 'cancelled' || to === 'timed-out' || NEXT[from].includes(to);
}

/** Outstanding messages a run record lists: enough to name a stuck one, small enough to rewrite at every checkpoint. */
export const OUTSTANDING_KEPT = 5;

export const runCountersSchema: z.ZodMiniType<RunCounters> = z.lazy(() =>
  z.object({
    planned: z.int().check(z.nonnegative()),
    dispatched: z.int().check(z.nonnegative()),
    succeeded: z.int().check(z.nonnegative()),
    failed: z.int().check(z.nonnegative()),
    duplicates: z.int().check(z.nonnegative()),
    rejected: z.int().check(z.nonnegative()),
  }),
);
/** A run's items by what became of them, as its leader's checkpoint counted them. */
export interface RunCounters {
  /** Items the split gave. */
  planned: number;
  /** Items whose work messages have surely been sent. */
  dispatched: number;
  succeeded: number;
  failed: number;
  /** Outcomes of items already counted, delivered again: each only raises this. */
  duplicates: number;
  /** Outcomes refused: malformed, or for an index outside the plan (kept with a reason). */
  rejected: number;
}

const ending: z.ZodMiniType<RunEnding> = z.lazy(() =>
  z.object({
    state: z.enum(['succeeded', 'failed', 'cancelled', 'timed-out']),
    reason: z.nullable(z.string()),
    output: z.boolean(),
  }),
);
/**
 * How a run ends, recorded before any of its end is written (output, manifest, terminal state),
 * so a leader that takes over half-way completes the same end instead of deciding another.
 */
export interface RunEnding {
  state: TerminalRunState;
  reason: string | null;
  /** Whether the run ends with an output (every item counted) or early, listing what is missing. */
  output: boolean;
}

const runRecordShape = () =>
  z.object({
    v: z.literal(1),
    runId: z.string(),
    job: z.string(),
    trigger: z.enum(['schedule', 'manual']),
    occurrence: z.nullable(z.string()),
    state: z.enum(RUN_STATES),
    createdAt: z.string(),
    updatedAt: z.string(),
    deadlineAt: z.string(),
    endedAt: z.nullable(z.string()),
    counters: runCountersSchema,
    planEpoch: z.nullable(z.int()),
    planChunks: z.int().check(z.nonnegative()),
    chunkItems: z.int().check(z.nonnegative()),
    messages: z.int().check(z.nonnegative()),
    cursor: z.int().check(z.nonnegative()),
    acc: z.unknown(),
    seen: z.nullable(z.string()),
    failureParts: z.array(z.string()),
    cancelRequested: z.boolean(),
    endReason: z.nullable(z.string()),
    outputKey: z.nullable(z.string()),
    manifestKey: z.nullable(z.string()),
    finalizeError: z.nullable(z.string()),
    planSegments: z._default(z.array(z.object({ epoch: z.int(), chunks: z.int().check(z.nonnegative()) })), []),
    planCursor: z._default(z.int().check(z.nonnegative()), 0),
    splitTimeouts: z._default(z.int().check(z.nonnegative()), 0),
    hedges: z._default(z.int().check(z.nonnegative()), 0),
    outstanding: z._default(
      z.array(
        z.object({
          message: z.int().check(z.nonnegative()),
          first: z.int().check(z.nonnegative()),
          count: z.int().check(z.nonnegative()),
          since: z.string(),
        }),
      ),
      [],
    ),
    ending: z._default(z.nullable(ending), null),
    firstItemAt: z._default(z.nullable(z.string()), null),
    dueAt: z._default(z.nullable(z.string()), null),
    pruned: z._default(
      z.nullable(
        z.object({
          output: z.nullable(z.string()),
          details: z.nullable(z.string()),
          run: z.nullable(z.string()),
          pending: z._default(z.nullable(z.enum(['output', 'details'])), null),
        }),
      ),
      null,
    ),
  });

/** A run record as stored, checked field by field when read; built on first use. */
export const runRecordSchema: z.ZodMiniType<RunRecord> = z.lazy(runRecordShape);

/** A run: one scheduled occurrence or manual trigger of a job, as its record in the hub says. */
export interface RunRecord {
  v: 1;
  /** `<job>/<occurrence>` for a scheduled run (the occurrence's UTC instant), unique for a manual one. */
  runId: string;
  job: string;
  trigger: 'schedule' | 'manual';
  /** The scheduled occurrence (ISO 8601, UTC); null for a manual run. */
  occurrence: string | null;
  state: RunState;
  createdAt: string;
  updatedAt: string;
  deadlineAt: string;
  endedAt: string | null;
  counters: RunCounters;
  /** The epoch whose plan chunks are the plan (set when planning completes). */
  planEpoch: number | null;
  planChunks: number;
  /** Items per plan chunk, a multiple of items per message so no message spans two chunks. */
  chunkItems: number;
  /** Messages the plan packs into. */
  messages: number;
  /** Messages surely sent. */
  cursor: number;
  /** The aggregate checkpoint: the accumulator after every item marked in `seen`. */
  acc: unknown;
  /** Base64 bitset over item indexes that have been counted (succeeded or failed). */
  seen: string | null;
  /**
   * The roots of the run's failure log, in order: write-once parts and indexes of parts
   * (`failure-log.ts`) that hold every failure the checkpoint counted, with its reason.
   */
  failureParts: string[];
  cancelRequested: boolean;
  endReason: string | null;
  outputKey: string | null;
  manifestKey: string | null;
  finalizeError: string | null;
  /**
   * Plan chunks persisted so far, in order, as runs of consecutive chunks each written under one
   * epoch: a leader that takes over mid-plan adds its own segment instead of planning again.
   */
  planSegments: Array<{ epoch: number; chunks: number }>;
  /** Items in the persisted chunks of `planSegments`: where a resumed split goes on from. */
  planCursor: number;
  /** Times the job's split gave no item within its bound; at the job's limit the run fails. */
  splitTimeouts: number;
  /**
   * Copies of work messages the leaders of this run have sent for stragglers (hedged dispatch).
   * Each leader adds its copies here in a fenced write before it sends them, so however often
   * the leader changes, the copies sent never exceed what this says, nor the job's bound.
   */
  hedges: number;
  /**
   * The oldest work messages sent and not counted yet (at most `OUTSTANDING_KEPT`, the longest
   * out first) as the leader saw them at its last checkpoint: each with its items and when it was
   * first sent (storage time; a leader that takes a run over keeps the times this list gave).
   * Only a leader that watches its run's messages (a job with hedged dispatch on) writes it;
   * records written before it existed have none.
   */
  outstanding: Array<{ message: number; first: number; count: number; since: string }>;
  /** How the run ends, once that is decided; records written before endings were recorded have none. */
  ending: RunEnding | null;
  /**
   * When (storage time) the leader's checkpoint first counted an item of the run, succeeded or
   * failed: with `occurrence`, how late the run's work began (its first-item lag).
   */
  firstItemAt: string | null;
  /**
   * When a scheduled run was due to start, for a job with `jitterSeconds`: its occurrence plus its
   * jitter. Its lags count from here. Null without jitter (they count from the occurrence).
   */
  dueAt: string | null;
  /**
   * What retention has deleted of this ended run, each with when it began (storage time): its
   * output, its details (failure log, manifest, attachments) or, last, the whole run. `pending`
   * names a part whose deletion began and has not been seen through.
   */
  pruned: {
    output: string | null;
    details: string | null;
    run: string | null;
    pending: 'output' | 'details' | null;
  } | null;
}

// The schema reads what the interface says, field for field: a field added to one and not the
// other fails to compile here.
type Same<A, B> = [A] extends [B] ? ([B] extends [A] ? true : false) : false;
const recordsAgree: Same<z.output<ReturnType<typeof runRecordShape>>, RunRecord> = true;
void recordsAgree;

export function newRunRecord(input: {
  runId: string;
  job: string;
  trigger: 'schedule' | 'manual';
  occurrence: Date | undefined;
  /** With jitter: when the occurrence was due to start. */
  dueAt?: Date;
  now: Date;
  timeoutSeconds: number;
}): RunRecord {
  const at = input.now.toISOString();
  return {
    v: 1,
    runId: input.runId,
    job: input.job,
    trigger: input.trigger,
    occurrence: input.occurrence ? input.occurrence.toISOString() : null,
    state: 'planning',
    createdAt: at,
    updatedAt: at,
    deadlineAt: new Date(input.now.getTime() + input.timeoutSeconds * 1000).toISOString(),
    endedAt: null,
    counters: { planned: 0, dispatched: 0, succeeded: 0, failed: 0, duplicates: 0, rejected: 0 },
    planEpoch: null,
    planChunks: 0,
    chunkItems: 0,
    messages: 0,
    cursor: 0,
    acc: null,
    seen: null,
    failureParts: [],
    cancelRequested: false,
    endReason: null,
    outputKey: null,
    manifestKey: null,
    finalizeError: null,
    planSegments: [],
    planCursor: 0,
    splitTimeouts: 0,
    hedges: 0,
    outstanding: [],
    ending: null,
    firstItemAt: null,
    dueAt:
      input.dueAt && input.occurrence && input.dueAt.getTime() !== input.occurrence.getTime() ? input.dueAt.toISOString() : null,
    pruned: null,
  };
}

/** Returns the record moved to `to`, or throws when the state machine does not allow it. */
export function transition(record: RunRecord, to: RunState, now: Date, endReason?: string): RunRecord {
  if (!canTransition(record.state, to)) throw new Error(`run ${record.runId}: cannot go from ${record.state} to ${to}`);
  const at = now.toISOString();
  return {
    ...record,
    state: to,
    updatedAt: at,
    endedAt: isTerminal(to) ? at : record.endedAt,
    endReason: endReason ?? record.endReason,
  };
}

/**
 * How late a scheduled run was created: from when it was due (its occurrence, plus its jitter if
 * the job has one) to its creation, both storage time (the leader's clock follows storage's).
 * Null for a manual run, which has no occurrence.
 */
export function startLagMs(record: Pick<RunRecord, 'occurrence' | 'createdAt' | 'dueAt'>): number | null {
  return record.occurrence === null ? null : Date.parse(record.createdAt) - Date.parse(record.dueAt ?? record.occurrence);
}

/**
 * How late a run's work began: from when it was due (a manual run: its creation) to the first
 * item the leader counted. Null until an item is counted.
 */
export function firstItemLagMs(record: Pick<RunRecord, 'occurrence' | 'createdAt' | 'firstItemAt' | 'dueAt'>): number | null {
  if (record.firstItemAt === null) return null;
  return Date.parse(record.firstItemAt) - Date.parse(record.dueAt ?? record.occurrence ?? record.createdAt);
}

/** Run ids: the job name plus the scheduled occurrence, so one occurrence can only ever be one run. */
export function scheduledRunId(job: string, occurrence: Date): string {
  return `${job}/${occurrence.toISOString()}`;
}

export function manualRunId(job: string, id: string): string {
  return `${job}/manual-${id}`;
}

/** Storage keys of everything that belongs to a run. */
export const runKeys = {
  record: (runId: string) => `runs/${runId}/run.json`,
  prefix: (runId: string) => `runs/${runId}/`,
  /** Chunk `chunk` of the run's plan, under the epoch of the segment that holds it. */
  planChunkOf: (record: Pick<RunRecord, 'runId' | 'planSegments' | 'planEpoch'>, chunk: number) =>
    runKeys.planChunk(record.runId, planChunkEpoch(record, chunk), chunk),
  planPrefix: (runId: string) => `runs/${runId}/plan/`,
  planChunk: (runId: string, epoch: number, chunk: number) =>
    `runs/${runId}/plan/e${epoch}/${String(chunk).padStart(6, '0')}.ndjson`,
  claim: (runId: string, id: string) => `runs/${runId}/claims/${id}.json`,
  claimsPrefix: (runId: string) => `runs/${runId}/claims/`,
  failurePart: (runId: string, epoch: number, seq: number, id: string) =>
    `runs/${runId}/failures/e${epoch}-${String(seq).padStart(6, '0')}-${id}.ndjson`,
  /** An index of the failure log: the keys of `FAILURE_LOG_FANOUT` parts or indexes one level below. */
  failureIndex: (runId: string, level: number, epoch: number, seq: number, id: string) =>
    `runs/${runId}/failures/i${level}-e${epoch}-${String(seq).padStart(6, '0')}-${id}.json`,
  output: (runId: string) => `runs/${runId}/output.json`,
  manifest: (runId: string) => `runs/${runId}/failures.json`,
  /** A file a job's `finalize` kept with the run (`FinalizeContext.attach`). */
  attachment: (runId: string, name: string) => `runs/${runId}/attachments/${name}`,
};

/** The epoch whose key holds chunk `chunk`; a record planned before segments has one epoch. */
function planChunkEpoch(record: Pick<RunRecord, 'planSegments' | 'planEpoch'>, chunk: number): number {
  let end = 0;
  for (const segment of record.planSegments) {
    end += segment.chunks;
    if (chunk < end) return segment.epoch;
  }
  return record.planEpoch ?? 0;
}
