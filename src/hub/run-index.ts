import { ConcurrentUpdateError, InvalidConfigError } from '../errors';
import type { DocumentStore } from '../fencing/document-store';
import { FencedDocuments } from '../fencing/fenced-documents';
import { runKeys, runRecordSchema, type RunRecord } from './run-record';

/**
 * The run index: what makes a page of runs cost a page, however long the hub's history.
 *
 * Each run has one empty-bodied entry in the hub's listing (`index/runs/`) and one in its job's
 * (`index/jobs/<job>/`), named by its creation time inverted, so that storage's lexical listing
 * gives the newest first: a page of N runs is one listing request of N names and N record reads.
 * The name carries everything a reader needs: `<day>/<time>-<run id in base64url>.json`, with
 * day and time counted down from far in the future. The day folder lets retention find the
 * oldest days in one listing of the folders.
 *
 * An entry is written before its run's record, and is true only while a record with that id and
 * that creation time exists. So a run is never missing from the index (a leader that stops
 * between the two writes leaves an entry without a record, which readers skip and retention
 * deletes), and an entry from an attempt that lost the race to create the record (another
 * leader's, another tick's) is skipped too: its time is not the record's.
 */

/** 13 digits of milliseconds, so names sort by time until the year 2286. */
const LAST_MS = 9_999_999_999_999;
export const DAY_MS = 86_400_000;
/** 5 digits of days. */
const LAST_DAY = 99_999;
const ENTRY = /^(\d{5})\/(\d{13})-([A-Za-z0-9_-]+)\.json$/;

/** The largest page: what one listing request returns. */
export const MAX_RUNS_PAGE = 1000;

export const runIndexKeys = {
  all: 'index/runs/',
  job: (job: string) => `index/jobs/${job}/`,
  /** The entry of a run created at `createdAt` under one of the prefixes above. */
  entry(prefix: string, runId: string, createdAt: string): string {
    const ms = Date.parse(createdAt);
    const time = String(LAST_MS - ms).padStart(13, '0');
    return `${runIndexDayFolder(prefix, Math.floor(ms / DAY_MS))}${time}-${Buffer.from(runId).toString('base64url')}.json`;
  },
};

/** The folder of `prefix` that holds the entries of runs created on `day` (days since 1970, UTC). */
export function runIndexDayFolder(prefix: string, day: number): string {
  return `${prefix}${String(LAST_DAY - day).padStart(5, '0')}/`;
}

/** The day (days since 1970, UTC) a folder of `prefix` holds, or undefined for another name. */
export function parseRunIndexDay(prefix: string, folder: string): number | undefined {
  const match = folder.startsWith(prefix) ? /^(\d{5})\/$/.exec(folder.slice(prefix.length)) : null;
  return match ? LAST_DAY - Number(match[1]) : undefined;
}

/** The run and creation time an entry name says, or undefined for a name that is not an entry. */
export function parseRunIndexEntry(prefix: string, key: string): { runId: string; createdMs: number } | undefined {
  const match = key.startsWith(prefix) ? ENTRY.exec(key.slice(prefix.length)) : null;
  if (!match) return undefined;
  return { runId: Buffer.from(match[3] as string, 'base64url').toString('utf8'), createdMs: LAST_MS - Number(match[2]) };
}

/** Both entries of a run, before its record is created (see above). */
export function runIndexEntries(record: Pick<RunRecord, 'runId' | 'job' | 'createdAt'>): string[] {
  return [runIndexKeys.all, runIndexKeys.job(record.job)].map((prefix) =>
    runIndexKeys.entry(prefix, record.runId, record.createdAt),
  );
}

/**
 * Writes both entries of a run about to be created, under the writer's epoch. An entry that
 * exists already (a retried creation at the same time) is left as it is. The hub's entry goes
 * first: it is how retention finds a run, so no job entry is ever left that it cannot find.
 */
export async function indexRun(
  docs: DocumentStore,
  epoch: number,
  record: Pick<RunRecord, 'runId' | 'job' | 'createdAt'>,
  options: { abortSignal?: AbortSignal } = {},
): Promise<void> {
  const entries = new FencedDocuments<Record<string, never>>(docs);
  for (const key of runIndexEntries(record)) {
    await entries.create(key, epoch, {}, options).catch((err: unknown) => {
      if (!(err instanceof ConcurrentUpdateError)) throw err;
    });
  }
}

export interface RunsPage {
  /** Newest first. */
  runs: RunRecord[];
  /** Pass as `after` for the next page; undefined when there are no older runs. */
  next: string | undefined;
}

export interface ListRunsOptions {
  /** Only runs of this job. */
  job?: string;
  /** At most this many runs (1 to `MAX_RUNS_PAGE`; default 20). */
  limit?: number;
  /** The `next` of the page before, from a listing with the same `job`. */
  after?: string;
  abortSignal?: AbortSignal;
}

interface Cursor {
  /** The job the listing was of, or null for every job. */
  j: string | null;
  /** The store's continuation. */
  c: string;
}

function encodeCursor(cursor: Cursor): string {
  return Buffer.from(JSON.stringify(cursor)).toString('base64url');
}

function decodeCursor(after: string, job: string | undefined): string {
  let cursor: Partial<Cursor> | undefined;
  try {
    cursor = JSON.parse(Buffer.from(after, 'base64url').toString('utf8')) as Partial<Cursor>;
  } catch {
    cursor = undefined;
  }
  if (!cursor || typeof cursor !== 'object' || typeof cursor.c !== 'string' || !('j' in cursor)) {
    throw new InvalidConfigError('after', 'after: not the next of a page of runs (pass the next value a page returned)');
  }
  if ((cursor.j ?? undefined) !== job) {
    const of = (name: string | null | undefined) => (name ? `of job ${name}` : 'of every job');
    throw new InvalidConfigError('after', `after: the next of a listing ${of(cursor.j)}, not ${of(job)}`);
  }
  return cursor.c;
}

/**
 * One page of runs, newest first, optionally of one job: one listing request and one read per
 * run (more only when entries without a current record fill part of a page).
 */
export async function listRuns(docs: DocumentStore, options: ListRunsOptions = {}): Promise<RunsPage> {
  const limit = options.limit ?? 20;
  if (!Number.isInteger(limit) || limit < 1 || limit > MAX_RUNS_PAGE) {
    throw new InvalidConfigError('limit', `limit: must be a whole number from 1 to ${MAX_RUNS_PAGE}`);
  }
  const prefix = options.job === undefined ? runIndexKeys.all : runIndexKeys.job(options.job);
  let continuation = options.after === undefined ? undefined : decodeCursor(options.after, options.job);
  const records = new FencedDocuments<RunRecord>(docs, { parse: (v) => runRecordSchema.parse(v) });
  const runs: RunRecord[] = [];
  do {
    const page = await docs.listPage(prefix, {
      pageSize: limit - runs.length,
      ...(continuation === undefined ? {} : { continuation }),
      ...(options.abortSignal ? { abortSignal: options.abortSignal } : {}),
    });
    continuation = page.continuation;
    const entries = page.keys.flatMap((key) => parseRunIndexEntry(prefix, key) ?? []);
    const read = await Promise.all(
      entries.map(async ({ runId, createdMs }) => {
        const doc = await records.read(runKeys.record(runId), { abortSignal: options.abortSignal });
        return doc && Date.parse(doc.value.createdAt) === createdMs ? doc.value : undefined;
      }),
    );
    for (const run of read) if (run) runs.push(run);
  } while (runs.length < limit && continuation !== undefined);
  return { runs, next: continuation === undefined ? undefined : encodeCursor({ j: options.job ?? null, c: continuation }) };
}
