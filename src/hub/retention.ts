import type { DocumentStore } from '../fencing/document-store';
import { FencedDocuments, type FencedDocument } from '../fencing/fenced-documents';
import { DAY_MS, parseRunIndexDay, parseRunIndexEntry, runIndexDayFolder, runIndexKeys } from './run-index';
import { isTerminal, runKeys, runRecordSchema, type RunRecord } from './run-record';

/**
 * Retention: how a hub's history stays bounded. The leader calls `retentionSlice` while idle;
 * each call looks at a few runs and returns, so deleting a year of history never delays a run.
 *
 * Two horizons, counted in whole days from a run's creation (storage time), read from the run
 * index's day folders oldest first:
 * - at the later of `runDays` and `outputDays`, the whole run goes: every blob under
 *   `runs/<run>/`, then its record, then its two index entries;
 * - at the earlier one, if they differ, one part goes first: the output (`outputDays` shorter), or
 *   else the details (failure log, manifest, attachments; `runDays` shorter), keeping the record
 *   and output so the run stays listed with its result.
 *
 * What holds:
 * - An open run is never touched, whatever its age (its blobs go once it ends and is old enough).
 * - Every deletion is fenced: it starts with a fenced write to the run's record (`pruned`), so a
 *   leader whose epoch a newer one has overtaken on that run is refused before it deletes.
 * - It is resumable: the record is deleted after every other blob of the run and the index
 *   entries after the record, so a slice cut short leaves what the next slice finds and finishes.
 *   The partial pass keeps its place in one fenced document (`index/retention.json`).
 * - Entries with no record (a creation that lost its race, a deletion cut short) are deleted,
 *   and an entry whose record has another creation time (a keyed run id used again after its
 *   run was deleted) goes without touching the newer run.
 */

export interface RetentionPolicy {
  /** Days a run's record, failure log, manifest, attachments and index entries are kept. */
  runDays: number;
  /** Days a run's output is kept; may be shorter or longer than `runDays`. */
  outputDays: number;
}

export const DEFAULT_RETENTION_DAYS = 30;
/** A century: the longest retention a setting may ask for. */
export const MAX_RETENTION_DAYS = 36_500;
/** How often an idle leader looks for runs past retention, unless the last slice found more. */
export const RETENTION_PAUSE_MS = 10 * 60_000;
/** Runs one slice looks at: each costs a handful of storage requests. */
export const RETENTION_SLICE_RUNS = 10;

export interface RetentionSliceOptions {
  /** The caller's fencing epoch. */
  epoch: number;
  /** Storage's time. */
  now: Date;
  policy: RetentionPolicy;
  /** Most runs to look at (default `RETENTION_SLICE_RUNS`). */
  budget?: number;
  abortSignal?: AbortSignal;
}

export interface RetentionSliceResult {
  /** Runs deleted whole. */
  deleted: string[];
  /** Runs whose output or details were deleted. */
  pruned: string[];
  /** Open runs past a horizon, left alone. */
  open: string[];
  /** Index entries deleted that named no current record. */
  strayEntries: number;
  /** Whether there is more to do now: call again soon rather than after the usual pause. */
  more: boolean;
}

const CURSOR_KEY = 'index/retention.json';

type PartialMode = 'output' | 'details';

interface RetentionCursor {
  v: 1;
  /** Which part the partial pass deletes; a cursor of the other mode starts over. */
  mode: PartialMode;
  /** The newest day the partial pass has finished. */
  doneThrough: number | null;
  /** A day under way and where its listing stopped. */
  day: number | null;
  continuation: string | null;
}

/** One small slice of retention work; see above. */
export async function retentionSlice(docs: DocumentStore, options: RetentionSliceOptions): Promise<RetentionSliceResult> {
  const sweep = new Sweep(docs, options);
  return sweep.run();
}

class Sweep {
  private readonly records: FencedDocuments<RunRecord>;
  private budget: number;
  private readonly at: string;
  private readonly signal: { abortSignal?: AbortSignal };
  readonly result: RetentionSliceResult = { deleted: [], pruned: [], open: [], strayEntries: 0, more: false };

  constructor(
    private readonly docs: DocumentStore,
    private readonly options: RetentionSliceOptions,
  ) {
    this.records = new FencedDocuments<RunRecord>(docs, { parse: (v) => runRecordSchema.parse(v) });
    this.budget = options.budget ?? RETENTION_SLICE_RUNS;
    this.at = options.now.toISOString();
    this.signal = options.abortSignal ? { abortSignal: options.abortSignal } : {};
  }

  async run(): Promise<RetentionSliceResult> {
    const { runDays, outputDays } = this.options.policy;
    const today = Math.floor(this.options.now.getTime() / DAY_MS);
    // A day's runs are all past a horizon of N days once the day ended N days ago.
    const wholeThrough = today - Math.max(runDays, outputDays) - 1;
    const partialThrough = today - Math.min(runDays, outputDays) - 1;
    const days = await this.days();
    for (const day of days) {
      if (day > wholeThrough) break;
      if (this.budget <= 0) {
        this.result.more = true;
        break;
      }
      await this.wholeDay(day);
    }
    if (runDays !== outputDays && this.budget > 0) {
      const mode: PartialMode = outputDays < runDays ? 'output' : 'details';
      await this.partialPass(
        mode,
        days.filter((day) => day > wholeThrough && day <= partialThrough),
      );
    }
    // Open runs past a horizon are looked at again on every slice: only progress asks for more soon.
    const progress = this.result.deleted.length + this.result.pruned.length + this.result.strayEntries > 0;
    this.result.more = this.result.more && progress;
    return this.result;
  }

  /** The days that have runs in the index, oldest first (the folders list newest first). */
  private async days(): Promise<number[]> {
    const days: number[] = [];
    let continuation: string | undefined;
    do {
      const page = await this.docs.listFolders(runIndexKeys.all, {
        pageSize: 5000,
        ...(continuation === undefined ? {} : { continuation }),
        ...this.signal,
      });
      for (const folder of page.keys) {
        const day = parseRunIndexDay(runIndexKeys.all, folder);
        if (day !== undefined) days.push(day);
      }
      continuation = page.continuation;
    } while (continuation !== undefined);
    return days.sort((a, b) => a - b);
  }

  /** Deletes the runs of `day` whole, as far as the budget goes. */
  private async wholeDay(day: number): Promise<void> {
    const folder = runIndexDayFolder(runIndexKeys.all, day);
    let continuation: string | undefined;
    do {
      const page = await this.docs.listPage(folder, {
        pageSize: this.budget,
        ...(continuation === undefined ? {} : { continuation }),
        ...this.signal,
      });
      for (const key of page.keys) {
        const entry = parseRunIndexEntry(runIndexKeys.all, key);
        if (!entry) continue;
        this.budget--;
        await this.deleteRun(entry.runId, entry.createdMs);
      }
      continuation = page.continuation;
      if (this.budget <= 0) {
        this.result.more = this.result.more || continuation !== undefined;
        return;
      }
    } while (continuation !== undefined);
  }

  private async deleteRun(runId: string, createdMs: number): Promise<void> {
    const key = runKeys.record(runId);
    const doc = await this.records.read(key, this.signal);
    if (!doc || Date.parse(doc.value.createdAt) !== createdMs) {
      await this.deleteEntries(runId, createdMs);
      this.result.strayEntries++;
      return;
    }
    if (!isTerminal(doc.value.state)) {
      this.result.open.push(runId);
      return;
    }
    if (!doc.value.pruned?.run) await this.mark(doc, { run: this.at });
    const prefix = runKeys.prefix(runId);
    for await (const blob of this.docs.list(prefix, this.signal)) {
      if (blob !== key) await this.docs.delete(blob, this.signal);
    }
    await this.docs.delete(key, this.signal);
    await this.deleteEntries(runId, createdMs);
    this.result.deleted.push(runId);
  }

  private async deleteEntries(runId: string, createdMs: number): Promise<void> {
    const createdAt = new Date(createdMs).toISOString();
    // A job name has no `/`, so it is the run id's first segment. The hub's entry is what the
    // sweep finds a run by, so it goes last.
    const job = runId.slice(0, runId.indexOf('/'));
    for (const prefix of [runIndexKeys.job(job), runIndexKeys.all]) {
      await this.docs.delete(runIndexKeys.entry(prefix, runId, createdAt), this.signal);
    }
  }

  /**
   * Deletes one part (`mode`) of each run on `days` (oldest first) that the pass has not done,
   * from where the cursor left off, as far as the budget goes.
   */
  private async partialPass(mode: PartialMode, days: number[]): Promise<void> {
    const cursors = new FencedDocuments<RetentionCursor>(this.docs);
    const stored = await cursors.read(CURSOR_KEY, this.signal);
    const fresh: RetentionCursor = { v: 1, mode, doneThrough: null, day: null, continuation: null };
    let cursor = stored && stored.value.mode === mode ? stored.value : fresh;
    const start = cursor;
    for (const day of days) {
      if (cursor.doneThrough !== null && day <= cursor.doneThrough) continue;
      if (this.budget <= 0) {
        this.result.more = true;
        break;
      }
      const page = await this.docs.listPage(runIndexDayFolder(runIndexKeys.all, day), {
        pageSize: this.budget,
        ...(cursor.day === day && cursor.continuation !== null ? { continuation: cursor.continuation } : {}),
        ...this.signal,
      });
      for (const key of page.keys) {
        const entry = parseRunIndexEntry(runIndexKeys.all, key);
        if (!entry) continue;
        this.budget--;
        await this.prunePart(mode, entry.runId, entry.createdMs);
      }
      cursor =
        page.continuation === undefined
          ? { ...cursor, doneThrough: day, day: null, continuation: null }
          : { ...cursor, day, continuation: page.continuation };
      if (page.continuation !== undefined) {
        this.result.more = true;
        break;
      }
    }
    if (cursor !== start) {
      const next = cursor;
      await cursors.update(CURSOR_KEY, this.options.epoch, () => next, this.signal);
    }
  }

  private async prunePart(mode: PartialMode, runId: string, createdMs: number): Promise<void> {
    const key = runKeys.record(runId);
    const doc = await this.records.read(key, this.signal);
    // No record, or another run's: the whole pass deals with the entry when its day comes.
    if (!doc || Date.parse(doc.value.createdAt) !== createdMs) return;
    if (!isTerminal(doc.value.state)) {
      this.result.open.push(runId);
      return;
    }
    if (doc.value.pruned?.[mode]) return;
    if (mode === 'output') {
      await this.mark(doc, { output: this.at }, { outputKey: null });
      await this.docs.delete(runKeys.output(runId), this.signal);
    } else {
      // The record keeps its counts and its output; what the failure log held goes with it.
      await this.mark(doc, { details: this.at }, { manifestKey: null, failureParts: [], seen: null });
      const keep = new Set([key, runKeys.output(runId)]);
      for await (const blob of this.docs.list(runKeys.prefix(runId), this.signal)) {
        if (!keep.has(blob)) await this.docs.delete(blob, this.signal);
      }
    }
    this.result.pruned.push(runId);
  }

  /** The fenced write that comes before a deletion: it names what goes, and when. */
  private async mark(
    doc: FencedDocument<RunRecord>,
    part: Partial<NonNullable<RunRecord['pruned']>>,
    fields: Partial<RunRecord> = {},
  ): Promise<void> {
    const pruned = { output: null, details: null, run: null, ...doc.value.pruned, ...part };
    await this.records.replace(
      runKeys.record(doc.value.runId),
      this.options.epoch,
      doc,
      { ...doc.value, ...fields, pruned },
      this.signal,
    );
  }
}
