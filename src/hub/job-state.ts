import * as z from '../zod';

const RECENT_LIMIT = 50;

/** Something the schedule did with an occurrence: started its run, or skipped, missed or cancelled it, and why. */
export interface JobEvent {
  at: string;
  occurrence: string | null;
  outcome: 'started' | 'skipped' | 'missed' | 'cancelled';
  runId?: string | undefined;
  reason?: string | undefined;
  /** A start of a job with jitter: when the occurrence was due to start (its lag counts from it). */
  dueAt?: string | undefined;
}

const jobEventShape = () =>
  z.object({
    at: z.string(),
    occurrence: z.nullable(z.string()),
    outcome: z.enum(['started', 'skipped', 'missed', 'cancelled']),
    runId: z.optional(z.string()),
    reason: z.optional(z.string()),
    dueAt: z.optional(z.string()),
  });
export const jobEventSchema: z.ZodMiniType<JobEvent> = z.lazy(jobEventShape);

/**
 * Per job, what the schedule has seen: where it checked up to, which runs are open, and the
 * latest starts, skips and misses so people can see why a run did or did not happen.
 */
export interface JobState {
  v: 1;
  job: string;
  /** The instant the schedule has been checked up to (storage time). */
  lastChecked: string | null;
  /** Runs of the job that are open. */
  active: string[];
  /** The latest events, newest last. */
  recent: JobEvent[];
  totals: { started: number; skipped: number; missed: number };
  /**
   * The schedule the last check read, so that the status can say when the job runs next without
   * the job's code; states written before it was recorded have none.
   */
  schedule?: JobScheduleRecord | undefined;
}

/** A job's schedule as its state records it. */
export interface JobScheduleRecord {
  expression: string;
  timeZone: string;
  jitterSeconds: number;
}

const jobStateShape = () =>
  z.object({
    v: z.literal(1),
    job: z.string(),
    lastChecked: z.nullable(z.string()),
    active: z.array(z.string()),
    recent: z.array(jobEventSchema),
    totals: z.object({
      started: z.int().check(z.nonnegative()),
      skipped: z.int().check(z.nonnegative()),
      missed: z.int().check(z.nonnegative()),
    }),
    schedule: z.optional(
      z.object({ expression: z.string(), timeZone: z.string(), jitterSeconds: z.int().check(z.nonnegative()) }),
    ),
  });
export const jobStateSchema: z.ZodMiniType<JobState> = z.lazy(jobStateShape);

// Each schema reads what its interface says, field for field (see run-record.ts).
type Same<A, B> = [A] extends [B] ? ([B] extends [A] ? true : false) : false;
const statesAgree: [
  Same<z.output<ReturnType<typeof jobEventShape>>, JobEvent>,
  Same<z.output<ReturnType<typeof jobStateShape>>, JobState>,
] = [true, true];
void statesAgree;

export const jobStateKey = (job: string): string => `jobs/${job}.json`;

export function newJobState(job: string): JobState {
  return { v: 1, job, lastChecked: null, active: [], recent: [], totals: { started: 0, skipped: 0, missed: 0 } };
}

/** Adds events, newest last, keeping the list bounded. */
export function withEvents(state: JobState, events: readonly JobEvent[]): JobState {
  if (events.length === 0) return state;
  return { ...state, recent: [...state.recent, ...events].slice(-RECENT_LIMIT) };
}
