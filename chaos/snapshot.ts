import { tickMessageSchema } from '../src/engine/messages';
import type { QueueServiceClient } from '@azure/storage-queue';
import { parseShardQueueName } from '../src/hub/resources';
import type { FailuresManifest, RunOutput } from '../src/hub/run-output';
import { readFailures, readFailuresManifest } from '../src/hub/failures-manifest';
import type { FailureEntry } from '../src/hub/fold';
import type { DocumentStore } from '../src/fencing/document-store';
import { FencedDocuments } from '../src/fencing/fenced-documents';
import { AzureQueue, AzureQueueDirectory } from '../src/queue/azure-queue';
import { runKeys, runRecordSchema, type RunRecord } from '../src/hub/run-record';
import { storageErrorOf } from '../src/storage/rest-error';
import type { CheckedRun, Leftover } from './invariants';

export interface HubSnapshot {
  runs: CheckedRun[];
  /** Run documents that could not be read or parsed, with why. */
  unreadable: Array<{ key: string; reason: string }>;
  leftovers: Leftover[];
  /** Every key under the run index. */
  indexEntries: Set<string>;
  /** Messages on the queues that were not seen (hidden by a receive, or past what a peek shows). */
  unseenMessages: number;
  /** Reads a run's failures as the checks go: a manifest only names where they are. */
  failuresOf: (manifest: FailuresManifest, onMissing: (key: string) => void) => AsyncIterable<FailureEntry>;
}

export interface SnapshotOptions {
  abortSignal?: AbortSignal;
  /**
   * How to look at the queues. `receive` (for a stopped app) sees every visible message and
   * hides each for 30 s; `peek` (for a live one) changes nothing but sees at most 32 per queue.
   */
  leftovers?: 'receive' | 'peek';
}

const HIDE_SECONDS = 30;

/**
 * Everything the invariant checker needs from a hub: every run record (with its ETag) with its
 * output and failures manifest, a reader of the failures the manifests name, and the messages
 * still on the work and results queues.
 */
export async function readHubSnapshot(
  docs: DocumentStore,
  queues: QueueServiceClient,
  hub: string,
  options: SnapshotOptions = {},
): Promise<HubSnapshot> {
  const records = new FencedDocuments<RunRecord>(docs, { parse: (v) => runRecordSchema.parse(v) });
  const runs: CheckedRun[] = [];
  const unreadable: HubSnapshot['unreadable'] = [];
  for await (const key of docs.list('runs/', options)) {
    if (!key.endsWith('/run.json')) continue;
    try {
      const doc = await records.read(key, options);
      if (!doc) continue;
      const output = await readJson<RunOutput>(docs, runKeys.output(doc.value.runId), options);
      const manifest = await readFailuresManifest(docs, doc.value.runId, options);
      runs.push({ record: doc.value, etag: doc.etag, ...(output ? { output } : {}), ...(manifest ? { manifest } : {}) });
    } catch (err) {
      if (storageErrorOf(err)) throw err;
      unreadable.push({ key, reason: err instanceof Error ? err.message.split('\n')[0]! : String(err) });
    }
  }
  const indexEntries = new Set<string>();
  for await (const key of docs.list('index/', options)) indexEntries.add(key);
  const leftovers: Leftover[] = [];
  let unseenMessages = 0;
  for (const name of await messageQueuesOf(queues, hub, options)) {
    const client = queues.getQueueClient(name);
    let total: number;
    try {
      total = (await client.getProperties({ abortSignal: options.abortSignal })).approximateMessagesCount ?? 0;
    } catch (err) {
      // A queue nobody ever used does not exist: nothing is left on it.
      if (storageErrorOf(err)?.status === 404) continue;
      throw err;
    }
    const seen = new Map<string, string>();
    if (options.leftovers === 'peek') {
      const peeked = await client.peekMessages({ numberOfMessages: 32, abortSignal: options.abortSignal });
      for (const m of peeked.peekedMessageItems) seen.set(m.messageId, m.messageText);
    } else {
      const queue = new AzureQueue(queues, name);
      for (;;) {
        const batch = (await queue.receive(32, HIDE_SECONDS, options)).filter((m) => !seen.has(m.id));
        if (batch.length === 0) break;
        for (const m of batch) seen.set(m.id, m.text);
      }
    }
    for (const [id, text] of seen) {
      // A tick (the leader's beacon, or a start-up tick) is no run's work: not a leftover.
      if (isTickMessage(text)) continue;
      const run = runNamedBy(text);
      leftovers.push({ queue: name, id, ...(run ? { run } : {}) });
    }
    unseenMessages += Math.max(0, total - seen.size);
  }
  const failuresOf = (manifest: FailuresManifest, onMissing: (key: string) => void) =>
    readFailures(docs, manifest, { abortSignal: options.abortSignal, onMissing });
  return { runs, unreadable, indexEntries, leftovers, unseenMessages, failuresOf };
}

async function readJson<T>(docs: DocumentStore, key: string, options: SnapshotOptions): Promise<T | undefined> {
  const stored = await docs.read(key, options);
  if (!stored) return undefined;
  try {
    return JSON.parse(stored.body) as T;
  } catch {
    throw new Error(`${key} is not JSON`);
  }
}

function runNamedBy(text: string): string | undefined {
  try {
    const run = (JSON.parse(text) as { run?: unknown }).run;
    return typeof run === 'string' ? run : undefined;
  } catch {
    return undefined;
  }
}

/** The work and results queues of every shard of `hub` that exists. */
export async function messageQueuesOf(
  queues: QueueServiceClient,
  hub: string,
  options: { abortSignal?: AbortSignal } = {},
): Promise<string[]> {
  const names = await new AzureQueueDirectory(queues).list(`${hub}-`, options);
  return names.filter((name) => {
    const role = parseShardQueueName(hub, name)?.role;
    return role === 'work' || role === 'results';
  });
}

/** Whether a queued text is a tick (the leader's beacon, or a start-up tick): no run's work. */
export function isTickMessage(text: string): boolean {
  try {
    return tickMessageSchema.safeParse(JSON.parse(text)).success;
  } catch {
    return false;
  }
}
