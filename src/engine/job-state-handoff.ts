import * as z from '../zod';
import type { DocumentCallOptions, DocumentStore } from '../fencing/document-store';
import { jobStateKey, jobStateSchema, type JobState } from '../hub/job-state';

/**
 * What a leader hands its successor at the end of its term: the job states it holds, each with
 * the version (ETag) it read or wrote. The successor lists `jobs/` (one request, ETags included)
 * and takes a handed state only where the listing shows that same version, so a state anyone
 * wrote since is read afresh; the rest it need not read. A hub with hundreds of jobs otherwise
 * reads every state at each change of leader, hundreds of reads in one second, every term.
 *
 * Unfenced and best effort: a missing, stale or damaged hand-off only costs the reads it saves.
 */
export const JOB_STATES_HANDOFF_KEY = 'leadership/job-states.json';

const handoffSchema = z.object({
  v: z.literal(1),
  epoch: z.number(),
  states: z.array(z.object({ etag: z.string(), value: z.unknown() })),
});

export interface HandedState {
  etag: string;
  value: JobState;
}

export async function writeJobStatesHandoff(
  docs: DocumentStore,
  epoch: number,
  states: ReadonlyArray<{ value: JobState; etag: string }>,
  options: DocumentCallOptions = {},
): Promise<void> {
  const body = JSON.stringify({ v: 1, epoch, states: states.map(({ value, etag }) => ({ etag, value })) });
  await docs.write(JOB_STATES_HANDOFF_KEY, body, {}, options);
}

/** The handed states by their blob's key; undefined when there is no hand-off or it cannot be read. */
export async function readJobStatesHandoff(
  docs: DocumentStore,
  options: DocumentCallOptions = {},
): Promise<Map<string, HandedState> | undefined> {
  const stored = await docs.read(JOB_STATES_HANDOFF_KEY, options);
  if (!stored) return undefined;
  let parsed: z.infer<typeof handoffSchema>;
  try {
    parsed = handoffSchema.parse(JSON.parse(stored.body));
  } catch {
    return undefined;
  }
  const out = new Map<string, HandedState>();
  for (const { etag, value } of parsed.states) {
    const state = jobStateSchema.safeParse(value);
    if (state.success) out.set(jobStateKey(state.data.job), { etag, value: state.data });
  }
  return out;
}
