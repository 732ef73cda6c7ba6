import * as z from '../zod';
import type { DocumentCallOptions, DocumentStore } from '../fencing/document-store';
import { StaleEpochError } from '../errors';
import { FencedDocuments } from '../fencing/fenced-documents';
import { jobStateKey, jobStateSchema, type JobState } from '../hub/job-state';

/**
 * What a leader hands its successor at the end of its term: the job states it holds, each with
 * the version (ETag) it read or wrote. The successor lists `jobs/` (one request, ETags included)
 * and takes a handed state only where the listing shows that same version, so a state anyone
 * wrote since is read afresh; the rest it need not read. A hub with hundreds of jobs otherwise
 * reads every state at each change of leader, hundreds of reads in one second, every term.
 *
 * Fenced like every document a leader writes, so a leader that has lost its lease cannot replace
 * a newer leader's hand-off; and best effort: a missing, stale or damaged one only costs the reads
 * it saves.
 */
export const JOB_STATES_HANDOFF_KEY = 'leadership/job-states.json';

const handoffSchema = z.object({
  v: z.literal(1),
  states: z.array(z.object({ etag: z.string(), value: z.unknown() })),
});
type Handoff = z.infer<typeof handoffSchema>;

const handoffs = (docs: DocumentStore) => new FencedDocuments<Handoff>(docs, { parse: (v) => handoffSchema.parse(v) });

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
  const handoff: Handoff = { v: 1, states: states.map(({ value, etag }) => ({ etag, value })) };
  const write = () => handoffs(docs).update(JOB_STATES_HANDOFF_KEY, epoch, () => handoff, { ...options, maxAttempts: 2 });
  try {
    await write();
  } catch (err) {
    // A newer leader's hand-off stands.
    if (err instanceof StaleEpochError) return;
    // One that cannot be read is removed (in the version read), then written afresh.
    const stored = await docs.read(JOB_STATES_HANDOFF_KEY, options);
    if (!stored) throw err;
    await docs.delete(JOB_STATES_HANDOFF_KEY, { ifMatch: stored.etag, ...options });
    await write();
  }
}

/** The handed states by their blob's key; undefined when there is no hand-off or it cannot be read. */
export async function readJobStatesHandoff(
  docs: DocumentStore,
  options: DocumentCallOptions = {},
): Promise<Map<string, HandedState> | undefined> {
  let parsed: Handoff | undefined;
  try {
    parsed = (await handoffs(docs).read(JOB_STATES_HANDOFF_KEY, options))?.value;
  } catch {
    return undefined;
  }
  if (!parsed) return undefined;
  const out = new Map<string, HandedState>();
  for (const { etag, value } of parsed.states) {
    const state = jobStateSchema.safeParse(value);
    if (state.success) out.set(jobStateKey(state.data.job), { etag, value: state.data });
  }
  return out;
}
