import { systemClock, type Clock } from '../clock/clock';
import type { DocumentStore } from '../fencing/document-store';
import { FencedDocuments } from '../fencing/fenced-documents';
import { isTerminal, runKeys, runRecordSchema, type RunRecord, type RunState } from '../hub/run-record';

export interface RunView {
  state: RunState;
  job: string;
  planned: number;
}

/**
 * How long a worker trusts an ended run's state without reading it again. Ended states never
 * change, but retention deletes old runs, and a keyed trigger may then make a new run with the
 * same id: this is far below `RETENTION_END_GRACE_MS`, so no worker still holds the old state.
 */
export const ENDED_RUN_TTL_MS = 10 * 60_000;

/**
 * What workers know of runs: a short-lived cache of run records, so a worker reads a run's
 * record about once per `ttlMs` instead of once per message, and an ended run's once per
 * `ENDED_RUN_TTL_MS`. Staleness only delays dropping messages of an ended run.
 */
export class RunStateCache {
  private readonly records: FencedDocuments<RunRecord>;
  private readonly clock: Clock;
  readonly ttlMs: number;
  private readonly entries = new Map<string, { view: RunView | undefined; at: number }>();

  constructor(docs: DocumentStore, options: { clock?: Clock; ttlMs?: number } = {}) {
    this.records = new FencedDocuments(docs, { parse: (v) => runRecordSchema.parse(v) });
    this.clock = options.clock ?? systemClock;
    this.ttlMs = options.ttlMs ?? 5000;
  }

  async get(runId: string, options: { abortSignal?: AbortSignal } = {}): Promise<RunView | undefined> {
    const cached = this.entries.get(runId);
    const ttl = cached?.view && isTerminal(cached.view.state) ? ENDED_RUN_TTL_MS : this.ttlMs;
    if (cached && this.clock.now() - cached.at < ttl) {
      return cached.view;
    }
    const doc = await this.records.read(runKeys.record(runId), options);
    const view = doc ? { state: doc.value.state, job: doc.value.job, planned: doc.value.counters.planned } : undefined;
    this.entries.set(runId, { view, at: this.clock.now() });
    if (this.entries.size > 1000) this.entries.delete(this.entries.keys().next().value as string);
    return view;
  }
}
