import * as z from 'zod';

const RECENT_LIMIT = 50;

export const jobEventSchema = z.lazy(() =>
  z.object({
    at: z.string(),
    occurrence: z.string().nullable(),
    outcome: z.enum(['started', 'skipped', 'missed', 'cancelled']),
    runId: z.string().optional(),
    reason: z.string().optional(),
  }),
);
export type JobEvent = z.infer<typeof jobEventSchema>;

/**
 * Per job, what the schedule has seen: where it checked up to, which runs are open, and the
 * latest starts, skips and misses so people can see why a run did or did not happen.
 */
export const jobStateSchema = z.lazy(() =>
  z.object({
    v: z.literal(1),
    job: z.string(),
    lastChecked: z.string().nullable(),
    active: z.array(z.string()),
    recent: z.array(jobEventSchema),
    totals: z.object({
      started: z.number().int().nonnegative(),
      skipped: z.number().int().nonnegative(),
      missed: z.number().int().nonnegative(),
    }),
  }),
);
export type JobState = z.infer<typeof jobStateSchema>;

export const jobStateKey = (job: string): string => `jobs/${job}.json`;

export function newJobState(job: string): JobState {
  return { v: 1, job, lastChecked: null, active: [], recent: [], totals: { started: 0, skipped: 0, missed: 0 } };
}

/** Adds events, newest last, keeping the list bounded. */
export function withEvents(state: JobState, events: readonly JobEvent[]): JobState {
  if (events.length === 0) return state;
  return { ...state, recent: [...state.recent, ...events].slice(-RECENT_LIMIT) };
}
