import type { Clock } from '../clock/clock';
import { ConcurrentUpdateError, messageOf, StaleEpochError } from '../errors';
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
 * - An open run is never touched, nor one that ended less than `RETENTION_END_GRACE_MS` ago
 *   (workers and the durable engine may still be looking at it). A run open at the earlier
 *   horizon keeps that part until the later one.
 * - Every deletion is fenced: each slice that deletes any of a run first writes the run's record
 *   (`pruned`) under its epoch, so a leader a newer one has overtaken is refused before it
 *   deletes. It then lists the run's blobs, checks that the record is still the version it
 *   wrote (so the listing is of this run, not of a newer run a keyed trigger made under the
 *   same id once the old one was gone), and deletes each blob only in the version it listed,
 *   the record last of all only in the version it wrote.
 * - It is resumable: the record goes after every other blob and the index entries after the
 *   record (the job's entry before the hub's, which is how the sweep finds a run), so a slice
 *   cut short leaves what a later one finds and finishes; a part whose deletion began is marked
 *   `pending` until it is done. The sweep keeps its place in one fenced document
 *   (`index/retention.json`): the whole pass, once it reaches the newest eligible day, starts
 *   again from the oldest, so runs it passed by (open, unreadable) are looked at once a pass;
 *   the partial pass goes over each day once.
 * - One run it cannot delete (a legal hold, a blob lease, a role taken away) holds the sweep up
 *   for `RETENTION_TRIES` slices, a pause apart, so a passing fault is waited out; then the sweep
 *   passes it by and goes on, and tries it again next pass. Each failure is in the slice's
 *   result; `RetentionPace.report` logs it once per run and counts each run passed by.
 * - Entries with no record (a creation that lost its race, a deletion cut short) are deleted,
 *   and an entry whose record has another creation time (a keyed run id used again) goes
 *   without touching the newer run.
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
/** Slices in a row that may fail on one run before the sweep passes it by (see above). */
export const RETENTION_TRIES = 3;
/** Runs one slice looks at: each costs a handful of storage requests. */
export const RETENTION_SLICE_RUNS = 10;
/**
 * A run is deleted no sooner than this after it ended, whatever its age: longer than a worker
 * keeps an ended run's state (`RunStateCache`), so a keyed trigger that makes a new run under the
 * same id is never taken for the old, ended one.
 */
export const RETENTION_END_GRACE_MS = 60 * 60_000;

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
  /** Runs past a horizon left alone: open, or ended within the grace. */
  open: string[];
  /** Index entries deleted that named no current record. */
  strayEntries: number;
  /** Runs that could not be dealt with (an unreadable record, a storage error), each with why. */
  failures: RetentionFailure[];
  /** Whether there is more to do now: call again soon rather than after the usual pause. */
  more: boolean;
}

/** A run a slice could not deal with. */
export interface RetentionFailure {
  runId: string;
  /** What went wrong, as the error said it. */
  reason: string;
  /** Slices in a row that failed on this run, this one included. */
  tries: number;
  /** Whether the sweep went on past it (it is tried again next pass). */
  passedBy: boolean;
}

const CURSOR_KEY = 'index/retention.json';

type PartialMode = 'output' | 'details';

/** Where a pass over the index stopped: a day, and where its listing stopped. */
interface Place {
  day: number;
  continuation: string | null;
}

interface RetentionCursor {
  v: 1;
  /** The whole-run pass; null: start from the oldest day. */
  whole: Place | null;
  /** The partial pass, for one mode (a cursor of the other mode starts over). */
  partial: (Place & { mode: PartialMode }) | null;
  /** The run the last slice stopped at, failing, and how many slices in a row did (absent: none). */
  failing?: { runId: string; tries: number } | null;
}

/**
 * When an idle leader runs its next slice: once every `RETENTION_PAUSE_MS`, and again at once
 * while the last one found more. A slice that fails waits out the pause. One per process, so it
 * outlives the leader's terms.
 */
export class RetentionPace {
  private nextAt = Number.NEGATIVE_INFINITY;

  constructor(private readonly clock: Pick<Clock, 'now'>) {}

  /** Whether a slice is due now. */
  get due(): boolean {
    return this.clock.now() >= this.nextAt;
  }

  /** A slice starts: the next waits out the pause unless `ran` says there is more. */
  started(): void {
    this.nextAt = this.clock.now() + RETENTION_PAUSE_MS;
  }

  ran(slice: Pick<RetentionSliceResult, 'more'>): void {
    if (slice.more) this.nextAt = Number.NEGATIVE_INFINITY;
  }

  /** Runs whose failure was logged already: each is logged once, however often it fails. */
  private readonly logged = new Set<string>();

  /**
   * Says what a slice did: a line for what it deleted, a warning the first time a run fails and
   * the first time it is passed by, and a count of each run passed by.
   */
  report(
    slice: RetentionSliceResult,
    log: { info(message: string): void; warn(message: string): void },
    passedBy?: (runId: string) => void,
  ): void {
    const line = describeRetentionSlice(slice);
    if (line) log.info(line);
    for (const failure of slice.failures) {
      if (failure.passedBy) passedBy?.(failure.runId);
      const key = `${failure.passedBy ? 'passed' : 'failed'}\n${failure.runId}`;
      if (this.logged.has(key)) continue;
      if (this.logged.size >= 1000) this.logged.delete(this.logged.values().next().value as string);
      this.logged.add(key);
      log.warn(
        failure.passedBy
          ? `retention: passed ${failure.runId} by after ${failure.tries} tries, to try again next pass: ${failure.reason}`
          : `retention: could not clear ${failure.runId}, will try again (${RETENTION_TRIES} tries in all before passing it by): ${failure.reason}`,
      );
    }
  }
}

/** The log line for a slice that deleted anything, or undefined for one that did not. */
export function describeRetentionSlice(slice: RetentionSliceResult): string | undefined {
  if (slice.deleted.length + slice.pruned.length + slice.strayEntries === 0) return undefined;
  const stray = `${slice.strayEntries} stray index entr${slice.strayEntries === 1 ? 'y' : 'ies'}`;
  return `retention: deleted ${slice.deleted.length} run(s), pruned ${slice.pruned.length}, removed ${stray}${slice.more ? '; more to do' : ''}`;
}

/** One small slice of retention work; see above. */
export async function retentionSlice(docs: DocumentStore, options: RetentionSliceOptions): Promise<RetentionSliceResult> {
  return new Sweep(docs, options).run();
}

class Sweep {
  private readonly records: FencedDocuments<RunRecord>;
  private budget: number;
  private readonly at: string;
  private readonly signal: { abortSignal?: AbortSignal };
  readonly result: RetentionSliceResult = { deleted: [], pruned: [], open: [], strayEntries: 0, failures: [], more: false };
  /** The run the sweep stopped at last, failing (from the cursor), and how many times in a row. */
  private failing: { runId: string; tries: number } | null = null;

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
    const wholeDays = days.filter((day) => day <= wholeThrough);
    const mode: PartialMode | undefined = runDays === outputDays ? undefined : outputDays < runDays ? 'output' : 'details';
    const partialDays = mode ? days.filter((day) => day > wholeThrough && day <= partialThrough) : [];
    if (wholeDays.length === 0 && partialDays.length === 0) return this.result;

    const cursors = new FencedDocuments<RetentionCursor>(this.docs);
    const stored = await cursors.read(CURSOR_KEY, this.signal);
    const start: RetentionCursor = stored?.value ?? { v: 1, whole: null, partial: null };
    this.failing = start.failing ?? null;
    // The whole pass goes round: what it passed by (open runs) it looks at again next time. The
    // partial pass goes once over each day, since the runs it has done stay in the index.
    const whole = await this.pass(wholeDays, start.whole, (runId, createdMs) => this.deleteRun(runId, createdMs));
    let partial = start.partial?.mode === mode ? start.partial : null;
    if (mode && this.budget > 0) {
      const place = await this.pass(partialDays, partial, (runId, createdMs) => this.prunePart(mode, runId, createdMs));
      const after = partialDays.at(-1);
      partial = place ? { ...place, mode } : after === undefined ? partial : { day: after + 1, continuation: null, mode };
    }
    const next: RetentionCursor = { v: 1, whole, partial, ...(this.failing ? { failing: this.failing } : {}) };
    if (JSON.stringify(next) !== JSON.stringify(start)) {
      await cursors.update(CURSOR_KEY, this.options.epoch, () => next, this.signal);
    }
    // Runs left alone are looked at again next pass: only progress asks for more soon.
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
      for (const folder of page.folders) {
        const day = parseRunIndexDay(runIndexKeys.all, folder);
        if (day !== undefined) days.push(day);
      }
      continuation = page.continuation;
    } while (continuation !== undefined);
    return days.sort((a, b) => a - b);
  }

  /**
   * Goes over the entries of `days` (oldest first) from `from`, handling each, as far as the
   * budget goes. Returns where to go on from, or null once the last day is done.
   */
  private async pass(
    days: number[],
    from: Place | null,
    handle: (runId: string, createdMs: number) => Promise<void>,
  ): Promise<Place | null> {
    for (const day of days) {
      if (from && day < from.day) continue;
      let continuation = from && day === from.day ? from.continuation : null;
      do {
        if (this.budget <= 0) {
          this.result.more = true;
          return { day, continuation };
        }
        const page = await this.docs.listPage(runIndexDayFolder(runIndexKeys.all, day), {
          pageSize: this.budget,
          ...(continuation === null ? {} : { continuation }),
          ...this.signal,
        });
        for (const key of page.keys) {
          const entry = parseRunIndexEntry(runIndexKeys.all, key);
          if (!entry) continue;
          this.budget--;
          // A failed request: this page again next slice, after the pause (what it did is done).
          if (!(await this.guarded(entry.runId, () => handle(entry.runId, entry.createdMs)))) return { day, continuation };
        }
        continuation = page.continuation ?? null;
      } while (continuation !== null);
    }
    return null;
  }

  /**
   * Runs `work` for one run. A failed request is noted and ends the pass for this slice (false),
   * to be tried again after the pause; once it has failed `RETENTION_TRIES` slices in a row, the
   * pass goes on past it (true).
   */
  private async guarded(runId: string, work: () => Promise<void>): Promise<boolean> {
    try {
      await work();
      if (this.failing?.runId === runId) this.failing = null;
      return true;
    } catch (err) {
      // A newer leader, or the end of the term: the slice stops.
      if (err instanceof StaleEpochError || this.options.abortSignal?.aborted) throw err;
      const tries = this.failing?.runId === runId ? this.failing.tries + 1 : 1;
      const passedBy = tries >= RETENTION_TRIES;
      this.result.failures.push({ runId, reason: messageOf(err), tries, passedBy });
      this.failing = passedBy ? null : { runId, tries };
      if (passedBy) return true;
      this.result.more = false;
      return false;
    }
  }

  /**
   * The record, if it is the run the entry names and may be pruned now; undefined, noting why,
   * if it is not; 'stray' if there is no such run.
   */
  private async prunable(runId: string, createdMs: number): Promise<FencedDocument<RunRecord> | 'stray' | undefined> {
    const key = runKeys.record(runId);
    let doc: FencedDocument<RunRecord> | undefined;
    try {
      doc = await this.records.read(key, this.signal);
    } catch (err) {
      // A body that is there and is not a run record stays so: noted and passed by every pass,
      // where a failed request is tried again.
      if (this.options.abortSignal?.aborted || !(await this.docs.read(key, this.signal))) throw err;
      this.result.failures.push({ runId, reason: messageOf(err), tries: 1, passedBy: true });
      return undefined;
    }
    if (!doc || Date.parse(doc.value.createdAt) !== createdMs) return 'stray';
    const ended = doc.value.endedAt === null ? Number.NaN : Date.parse(doc.value.endedAt);
    if (!isTerminal(doc.value.state) || !(this.options.now.getTime() - ended >= RETENTION_END_GRACE_MS)) {
      this.result.open.push(runId);
      return undefined;
    }
    return doc;
  }

  private async deleteRun(runId: string, createdMs: number): Promise<void> {
    const doc = await this.prunable(runId, createdMs);
    if (doc === 'stray') {
      await this.deleteEntries(runId, createdMs);
      this.result.strayEntries++;
      return;
    }
    if (!doc) return;
    const marked = await this.mark(doc, { run: doc.value.pruned?.run ?? this.at });
    if (!(await this.deleteBlobs(marked, () => true))) return;
    try {
      await this.docs.delete(runKeys.record(runId), { ifMatch: marked.etag, ...this.signal });
    } catch (err) {
      // Another leader took the run over since: its sweep, not this one, ends the deletion.
      if (err instanceof ConcurrentUpdateError) return;
      throw err;
    }
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

  /** Deletes one part (`mode`) of an ended run past the earlier horizon; again if a slice was cut short. */
  private async prunePart(mode: PartialMode, runId: string, createdMs: number): Promise<void> {
    const doc = await this.prunable(runId, createdMs);
    // No record, or another run's: the whole pass deals with the entry when its day comes.
    if (doc === 'stray' || !doc) return;
    const pruned = doc.value.pruned;
    if (pruned?.[mode] && pruned.pending !== mode) return;
    const output = runKeys.output(runId);
    const at = pruned?.[mode] ?? this.at;
    const marked =
      mode === 'output'
        ? await this.mark(doc, { output: at, pending: mode }, { outputKey: null })
        : // The record keeps its counts and its output; what the failure log held goes.
          await this.mark(doc, { details: at, pending: mode }, { manifestKey: null, failureParts: [], seen: null });
    const gone = mode === 'output' ? (key: string) => key === output : (key: string) => key !== output;
    if (!(await this.deleteBlobs(marked, gone))) return;
    await this.mark(marked, { pending: null });
    this.result.pruned.push(runId);
  }

  /**
   * Deletes the blobs of the marked run that `which` picks (never the record), each in the
   * version listed, if the record is still the version marked once they are listed. False when
   * it is not: another leader took the run over, or deleted it.
   */
  private async deleteBlobs(marked: FencedDocument<RunRecord>, which: (key: string) => boolean): Promise<boolean> {
    const record = runKeys.record(marked.value.runId);
    const listed: Array<{ key: string; etag: string }> = [];
    let continuation: string | undefined;
    do {
      const page = await this.docs.listPage(runKeys.prefix(marked.value.runId), {
        pageSize: 5000,
        ...(continuation === undefined ? {} : { continuation }),
        ...this.signal,
      });
      page.keys.forEach((key, k) => {
        if (key !== record && which(key)) listed.push({ key, etag: page.etags[k] as string });
      });
      continuation = page.continuation;
    } while (continuation !== undefined);
    // While the record stays as marked no other run can have this id, so the listing is this run's.
    if ((await this.docs.read(record, this.signal))?.etag !== marked.etag) return false;
    for (const { key, etag } of listed) {
      try {
        await this.docs.delete(key, { ifMatch: etag, ...this.signal });
      } catch (err) {
        // Rewritten since it was listed: not the version this run left, so not this sweep's.
        if (!(err instanceof ConcurrentUpdateError)) throw err;
      }
    }
    return true;
  }

  /** The fenced write that comes before every deletion: it names what goes, and since when. */
  private async mark(
    doc: FencedDocument<RunRecord>,
    part: Partial<NonNullable<RunRecord['pruned']>>,
    fields: Partial<RunRecord> = {},
  ): Promise<FencedDocument<RunRecord>> {
    const pruned = { output: null, details: null, run: null, pending: null, ...doc.value.pruned, ...part };
    return this.records.replace(
      runKeys.record(doc.value.runId),
      this.options.epoch,
      doc,
      { ...doc.value, ...fields, pruned },
      this.signal,
    );
  }
}
