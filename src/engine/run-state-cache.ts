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
 * What workers know of runs: a short-lived cache of run records, so a worker reads a run's
 * record about once per `ttlMs` instead of once per message. Terminal states never change,
 * so they are kept for good. Staleness only delays dropping messages of an ended run.
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
    if (cached && (cached.view && isTerminal(cached.view.state) ? true : this.clock.now() - cached.at < this.ttlMs)) {
      return cached.view;
    }
    const doc = await this.records.read(runKeys.record(runId), options);
    const view = doc ? { state: doc.value.state, job: doc.value.job, planned: doc.value.counters.planned } : undefined;
    this.entries.set(runId, { view, at: this.clock.now() });
    if (this.entries.size > 1000) this.entries.delete(this.entries.keys().next().value as string);
    return view;
  }
}
