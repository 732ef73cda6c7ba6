import type { FailuresManifest } from '../engine/finalizer';
import type { DocumentStore } from '../fencing/document-store';
import { StaleEpochError } from '../errors';
import { isTerminal, runKeys, transition } from '../runs/run-record';
import type { DurableClientPort, InstanceView } from './client-port';
import { chunkInstancePrefix, runInstanceId } from './instance-ids';
import { DURABLE_EPOCH } from './names';
import { runRecords } from './run-records';
import { writeOnce } from '../fencing/write-once';

/**
 * Cancels a durable run (overlap `replace`): terminates its orchestration and its chunks'
 * (terminating a parent does not stop its sub-orchestrations), then ends the record
 * `cancelled` with a manifest. As in the queue engine, a run already finalizing is left to
 * finish, and only its orchestrations are stopped when the record is gone or not durable's.
 * Returns whether the record was cancelled.
 */
export async function cancelDurableRun(
  client: DurableClientPort,
  docs: DocumentStore,
  open: readonly InstanceView[],
  runId: string,
  reason: string,
  now: Date,
  signal?: AbortSignal,
): Promise<boolean> {
  const records = runRecords(docs);
  const key = runKeys.record(runId);
  const current = await records.read(key, { abortSignal: signal });
  if (current?.value.state === 'finalizing') return false;
  const instance = runInstanceId(runId);
  const chunkPrefix = chunkInstancePrefix(instance);
  for (const view of open) {
    if (view.instanceId === instance || view.instanceId.startsWith(chunkPrefix)) await client.terminate(view.instanceId, reason);
  }
  let cancelled = false;
  let written;
  try {
    written = await records.update(
      key,
      DURABLE_EPOCH,
      (record) => {
        // `update` may call this more than once; the last call's answer is what was written.
        cancelled = !!record && !isTerminal(record.state) && record.state !== 'finalizing';
        return cancelled && record ? transition(record, 'cancelled', now, reason) : undefined;
      },
      { abortSignal: signal },
    );
  } catch (err) {
    if (err instanceof StaleEpochError) return false; // a queue-engine run: not ours to end
    throw err;
  }
  if (!cancelled || !written) return false;
  // The orchestration held the item outcomes; none of them reached storage.
  const manifest: FailuresManifest = {
    runId,
    state: 'cancelled',
    failed: [],
    missing: [],
    missingCount: written.value.counters.planned,
  };
  await writeOnce(docs, runKeys.manifest(runId), manifest, signal);
  await records.update(
    key,
    DURABLE_EPOCH,
    (record) => (record && record.manifestKey === null ? { ...record, manifestKey: runKeys.manifest(runId) } : undefined),
    { abortSignal: signal },
  );
  return true;
}
