import type { QueueServiceClient } from '@azure/storage-queue';
import { hubResources } from '../app/runtime';
import { readRunDetails } from '../engine/status';
import type { DocumentStore } from '../fencing/document-store';
import { AzureQueue } from '../queue/azure-queue';
import { storageErrorOf } from '../storage/rest-error';
import type { CheckedRun, Leftover } from './invariants';

export interface HubSnapshot {
  runs: CheckedRun[];
  leftovers: Leftover[];
}

/** How long `readHubSnapshot` hides each queued message while it counts them. */
export const LEFTOVER_HIDE_SECONDS = 30;

/**
 * Everything the invariant checker needs from a hub: every run record with its output and
 * failures manifest, and every message still on the work and results queues. Counting the
 * messages means receiving them, so each is hidden for `LEFTOVER_HIDE_SECONDS` (not deleted):
 * run it with the app stopped, or accept that delay for the messages it saw.
 */
export async function readHubSnapshot(
  docs: DocumentStore,
  queues: QueueServiceClient,
  hub: string,
  options: { abortSignal?: AbortSignal } = {},
): Promise<HubSnapshot> {
  const runs: CheckedRun[] = [];
  for await (const key of docs.list('runs/', options)) {
    if (!key.endsWith('/run.json')) continue;
    const runId = key.slice('runs/'.length, -'/run.json'.length);
    const details = await readRunDetails(docs, runId, options);
    if (details) {
      runs.push({
        record: details.record,
        ...(details.output ? { output: details.output } : {}),
        ...(details.manifest ? { manifest: details.manifest } : {}),
      });
    }
  }
  const names = hubResources(hub);
  const leftovers: Leftover[] = [];
  for (const name of [names.workQueue, names.resultsQueue]) {
    const queue = new AzureQueue(queues, name);
    const seen = new Set<string>();
    for (;;) {
      const batch = await queue.receive(32, LEFTOVER_HIDE_SECONDS, options).catch((err: unknown) => {
        // A queue nobody ever used does not exist: nothing is left on it.
        if (storageErrorOf(err)?.status === 404) return [];
        throw err;
      });
      const fresh = batch.filter((m) => !seen.has(m.id));
      if (fresh.length === 0) break;
      for (const message of fresh) {
        seen.add(message.id);
        const run = runNamedBy(message.text);
        leftovers.push({ queue: name, id: message.id, ...(run ? { run } : {}) });
      }
    }
  }
  return { runs, leftovers };
}

function runNamedBy(text: string): string | undefined {
  try {
    const run = (JSON.parse(text) as { run?: unknown }).run;
    return typeof run === 'string' ? run : undefined;
  } catch {
    return undefined;
  }
}
