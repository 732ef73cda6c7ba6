import type { DocumentStore } from '../../src/fencing/document-store';
import { FencedDocuments } from '../../src/fencing/fenced-documents';
import { writeOnce, writeOnceText } from '../../src/fencing/write-once';
import { appendFailures } from '../../src/hub/failure-log';
import { writeFailuresManifest } from '../../src/hub/failures-manifest';
import { indexRun, runIndexEntries } from '../../src/hub/run-index';
import { manualRunId, newRunRecord, runKeys, transition, type RunRecord } from '../../src/hub/run-record';

export const DAY = 86_400_000;

export interface SeededRun {
  runId: string;
  createdAt: string;
  /** Every blob the run has: its record, its parts and its two index entries. */
  keys: string[];
}

/**
 * A run made directly in storage as the engine leaves it, `age` ms before `now`: an ended run
 * has its record, output, manifest, a failure part and an attachment; an open one its record,
 * a plan chunk and a claim. Both have their two index entries.
 */
export async function seedRun(
  docs: DocumentStore,
  options: { job: string; name: string; now: Date; age: number; open?: boolean; epoch?: number },
): Promise<SeededRun> {
  const epoch = options.epoch ?? 1;
  const at = new Date(options.now.getTime() - options.age);
  const runId = manualRunId(options.job, options.name);
  let record = newRunRecord({ runId, job: options.job, trigger: 'manual', occurrence: undefined, now: at, timeoutSeconds: 60 });
  const keys = [...runIndexEntries(record), runKeys.record(runId)];
  await indexRun(docs, epoch, record);
  if (options.open) {
    record = transition(transition(record, 'dispatching', at), 'running', at);
    const chunk = runKeys.planChunk(runId, epoch, 0);
    const claim = runKeys.claim(runId, 'c1');
    await docs.write(chunk, '{"i":0}\n', {});
    await docs.write(claim, '[{"i":0}]', {});
    keys.push(chunk, claim);
  } else {
    const failureParts = await appendFailures(docs, {
      runId,
      epoch,
      roots: [],
      failures: [{ item: 3, reason: 'Error: cursed', attempts: 1 }],
    });
    const end = new Date(at.getTime() + 1000);
    record = (['dispatching', 'running', 'finalizing', 'succeeded'] as const).reduce((r, to) => transition(r, to, end), record);
    record = {
      ...record,
      failureParts,
      outputKey: runKeys.output(runId),
      manifestKey: runKeys.manifest(runId),
      counters: { ...record.counters, planned: 4, dispatched: 4, succeeded: 3, failed: 1 },
    };
    await writeOnce(docs, runKeys.output(runId), { runId, job: options.job, output: { sum: 6 } });
    await writeFailuresManifest(docs, { runId, state: 'succeeded', failedCount: 1, failureParts, missing: [], missingCount: 0 });
    await writeOnceText(docs, runKeys.attachment(runId, 'report.txt'), 'all good\n');
    keys.push(...failureParts, runKeys.output(runId), runKeys.manifest(runId), runKeys.attachment(runId, 'report.txt'));
  }
  await new FencedDocuments<RunRecord>(docs).create(runKeys.record(runId), epoch, record);
  return { runId, createdAt: record.createdAt, keys: keys.sort() };
}

/** Every key under `prefix`, sorted. */
export async function keysUnder(docs: DocumentStore, prefix: string): Promise<string[]> {
  const keys: string[] = [];
  for await (const key of docs.list(prefix)) keys.push(key);
  return keys.sort();
}

/** The blobs of `run` still in storage. */
export async function blobsOf(docs: DocumentStore, run: SeededRun): Promise<string[]> {
  const present = await Promise.all(run.keys.map(async (key) => ((await docs.read(key)) ? key : undefined)));
  const under = await keysUnder(docs, runKeys.prefix(run.runId));
  return [...new Set([...present.flatMap((k) => k ?? []), ...under])].sort();
}
