import type { DocumentStore } from '../fencing/document-store';
import { FencedDocuments, type FencedDocument } from '../fencing/fenced-documents';
import { runKeys, runRecordSchema, type RunRecord } from '../hub/run-record';
import type { RunResult } from './contracts';
import { DURABLE_EPOCH } from './names';

/** Run records as the queue engine and the CLI read them, written by the durable engine at `DURABLE_EPOCH`. */
export function runRecords(docs: DocumentStore): FencedDocuments<RunRecord> {
  return new FencedDocuments<RunRecord>(docs, { parse: (v) => runRecordSchema.parse(v) });
}

/** A record some queue-engine leader has written: the durable engine must leave it alone. */
export class ForeignRunError extends Error {
  override name = 'ForeignRunError';

  constructor(runId: string, epoch: number) {
    super(`run ${runId} was written by a queue-engine leader (epoch ${epoch}); the durable engine leaves it alone`);
  }
}

export function assertDurableRecord(runId: string, doc: FencedDocument<RunRecord>): void {
  if (doc.epoch !== DURABLE_EPOCH) throw new ForeignRunError(runId, doc.epoch);
}

/** Deletes every plan directory of the run except `keep` (a losing or abandoned split attempt's). */
export async function deleteOtherPlans(
  docs: DocumentStore,
  runId: string,
  keep: number | null,
  options: { abortSignal?: AbortSignal } = {},
): Promise<void> {
  const prefix = runKeys.planPrefix(runId);
  const kept = keep === null ? undefined : `${prefix}e${keep}/`;
  for await (const key of docs.list(prefix, options)) {
    if (kept && key.startsWith(kept)) continue;
    await docs.delete(key, options);
  }
}

/** What a run orchestration reports about a run, from its record. */
export function runResultOf(record: RunRecord): RunResult {
  return {
    runId: record.runId,
    state: record.state,
    counts: { planned: record.counters.planned, succeeded: record.counters.succeeded, failed: record.counters.failed },
    outputKey: record.outputKey,
    manifestKey: record.manifestKey,
  };
}
