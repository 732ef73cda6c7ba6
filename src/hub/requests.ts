import { createHash, randomUUID } from 'node:crypto';
import * as z from '../zod';
import { InvalidConfigError } from '../errors';
import type { DocumentStore } from '../fencing/document-store';
import { FencedDocuments } from '../fencing/fenced-documents';
import { jobStateKey, jobStateSchema, type JobState } from './job-state';
import { isTerminal, runKeys, runRecordSchema, type RunRecord } from './run-record';
import { checkRunId, isManualSegment, isRunId } from './run-id';
import { JOB_NAME_PATTERN } from '../jobs/define-job';

const PREFIX = 'requests/';

/**
 * Anyone may ask for a run or a cancel; only the leader acts on it. Requests are small blobs
 * the leader reads, applies under its epoch, and deletes, so a request made while no one leads
 * waits for the next leader instead of racing it.
 */
export const requestSchema = z.lazy(() =>
  z.discriminatedUnion('kind', [
    // Checked as the library writes them: a request blob is storage anyone with write access can
    // forge, and what it names becomes a blob name under the leader's epoch.
    z.object({
      kind: z.literal('run'),
      job: z.string().check(z.regex(JOB_NAME_PATTERN)),
      id: z.string().check(z.refine(isManualSegment, { message: 'not a manual run id' })),
      /** `wait`: the leader applies it only once no other run of the job is open. */
      ifActive: z.optional(z.enum(['start', 'wait'])),
    }),
    z.object({
      kind: z.literal('cancel'),
      runId: z.string().check(z.refine(isRunId, { message: 'not a run id' })),
      reason: z.string(),
    }),
  ]),
);
export type EngineRequest = z.infer<typeof requestSchema>;

/** Storage's time as a client learns it from its answers (a `StorageTimeClock` fed by `docs`'s client). */
export interface RequestClock {
  date(): Date;
  /** Whether any answer has been seen; until then `date()` is this machine's clock. */
  readonly synced: boolean;
}

export interface RequestOptions {
  abortSignal?: AbortSignal;
  /**
   * What the request is named by (requests are applied in name order, and one the leader cannot
   * apply waits an hour by it): storage's time. While it has seen no answer, one read comes
   * first, so a client's first request is named by storage's time too. Default: this machine's
   * clock.
   */
  clock?: RequestClock;
}

/** Never written: read only for the Date of its answer (a 404). */
const TIME_PROBE_KEY = 'requests/.time';

/** The longest idempotency key, in characters. */
export const MAX_RUN_KEY_LENGTH = 200;

/**
 * The manual id a key names: the same key always names the same run of a job, whoever asks and
 * however often. Hashed, so that any text can be a key and none shows in storage names.
 */
export function keyedRunSegment(key: string): string {
  if (key.length === 0 || key.length > MAX_RUN_KEY_LENGTH || /[\u0000-\u001f\u007f]/.test(key)) {
    throw new InvalidConfigError('key', `key: must be 1 to ${MAX_RUN_KEY_LENGTH} characters with no control characters`);
  }
  return `k-${createHash('sha256').update(key).digest('base64url').slice(0, 32)}`;
}

/**
 * What a trigger does while a run of its job is open: `start` another anyway (the default, and
 * what a manual run always did), `skip` it and answer with the open run's id (decided when asked;
 * see `openRunOf`), or `wait` for the open runs to end and start then (decided by the leader).
 */
export type IfActive = 'start' | 'skip' | 'wait';
export const IF_ACTIVE: readonly IfActive[] = ['start', 'skip', 'wait'];

export interface RunRequestOptions extends RequestOptions {
  /**
   * An idempotency key: every request with the same key for the same job names the same run,
   * and the leader starts it at most once (a retried trigger starts nothing new). Without one,
   * each request is a new run.
   */
  key?: string;
  /** While a run of the job is open: see `IfActive`. Default `start`. */
  ifActive?: IfActive;
  /**
   * Called once the request is written, to wake a leader that rests until the next occurrence
   * (`wakeHub`). It must not reject: the request stands either way, and the run then starts when
   * the rest ends.
   */
  wake?: (options: { abortSignal?: AbortSignal }) => Promise<void>;
}

/**
 * Asks the leader to start a manual run of `job`; returns the run id it will have, or with
 * `ifActive: 'skip'` and a run of the job open, that run's id (and asks for nothing).
 */
export async function requestRun(docs: DocumentStore, job: string, options: RunRequestOptions = {}): Promise<string> {
  return (await triggerRun(docs, job, options)).runId;
}

/** `requestRun`, saying whether it asked: `requested` is false when `ifActive: 'skip'` found a run open. */
export async function triggerRun(
  docs: DocumentStore,
  job: string,
  options: RunRequestOptions = {},
): Promise<{ runId: string; requested: boolean }> {
  // The leader would set aside a request for a name no job can have; say so to the caller instead.
  if (typeof job !== 'string' || !JOB_NAME_PATTERN.test(job))
    throw new InvalidConfigError('job', `job: ${JSON.stringify(String(job).slice(0, 60))} is not a job name`);
  const id = options.key === undefined ? randomUUID() : keyedRunSegment(options.key);
  if (options.ifActive === 'skip') {
    const open = await openRunOf(docs, job, options);
    if (open) return { runId: open, requested: false };
  }
  await write(docs, { kind: 'run', job, id, ...(options.ifActive === 'wait' ? { ifActive: 'wait' as const } : {}) }, options);
  await options.wake?.(options.abortSignal ? { abortSignal: options.abortSignal } : {});
  return { runId: `${job}/manual-${id}`, requested: true };
}

/** The newest open run of `job` by its leader's job state (its record read to be sure), if any. */
async function openRunOf(
  docs: DocumentStore,
  job: string,
  options: { abortSignal?: AbortSignal } = {},
): Promise<string | undefined> {
  const state = await new FencedDocuments<JobState>(docs, { parse: (v) => jobStateSchema.parse(v) }).read(
    jobStateKey(job),
    options,
  );
  const records = new FencedDocuments<RunRecord>(docs, { parse: (v) => runRecordSchema.parse(v) });
  for (const runId of [...(state?.value.active ?? [])].reverse()) {
    const run = await records.read(runKeys.record(runId), options);
    if (run && !isTerminal(run.value.state)) return runId;
  }
  return undefined;
}

/** Asks the leader to cancel a run; its workers then drop the run's messages. */
export async function requestCancel(
  docs: DocumentStore,
  runId: string,
  reason = 'cancelled on request',
  options: RequestOptions = {},
): Promise<void> {
  await write(docs, { kind: 'cancel', runId: checkRunId(runId), reason }, options);
}

async function write(docs: DocumentStore, request: EngineRequest, options: RequestOptions): Promise<void> {
  const { clock, abortSignal } = options;
  if (clock && !clock.synced) await docs.read(TIME_PROBE_KEY, { abortSignal });
  // Time-ordered keys, so the leader applies requests in the order they were made.
  const key = `${PREFIX}${(clock?.date() ?? new Date()).toISOString()}-${randomUUID()}.json`;
  await docs.write(key, JSON.stringify(request), { ifNoneMatch: '*' }, { abortSignal });
}

/** When a request was made, from its name (see `write`); undefined for a name not of that form. */
function madeAtOf(key: string): Date | undefined {
  const at = Date.parse(/^requests\/(\d{4}-\d\d-\d\dT[\d:.]+Z)-/.exec(key)?.[1] ?? '');
  return Number.isNaN(at) ? undefined : new Date(at);
}

export async function* pendingRequests(
  docs: DocumentStore,
  options: { abortSignal?: AbortSignal } = {},
): AsyncIterable<{ key: string; request: EngineRequest | undefined; madeAt: Date | undefined }> {
  for await (const key of docs.list(PREFIX, options)) {
    const stored = await docs.read(key, options);
    if (!stored) continue;
    let parsed: EngineRequest | undefined;
    try {
      const result = requestSchema.safeParse(JSON.parse(stored.body));
      parsed = result.success ? result.data : undefined;
    } catch {
      parsed = undefined;
    }
    yield { key, request: parsed, madeAt: madeAtOf(key) };
  }
}
