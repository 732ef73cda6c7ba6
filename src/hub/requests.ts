import { randomUUID } from 'node:crypto';
import { z } from 'zod';
import type { DocumentStore } from '../fencing/document-store';

const PREFIX = 'requests/';

/**
 * Anyone may ask for a run or a cancel; only the leader acts on it. Requests are small blobs
 * the leader reads, applies under its epoch, and deletes, so a request made while no one leads
 * waits for the next leader instead of racing it.
 */
export const requestSchema = z.discriminatedUnion('kind', [
  z.object({ kind: z.literal('run'), job: z.string(), id: z.string() }),
  z.object({ kind: z.literal('cancel'), runId: z.string(), reason: z.string() }),
]);
export type EngineRequest = z.infer<typeof requestSchema>;

export interface RequestOptions {
  abortSignal?: AbortSignal;
  /**
   * The time the request is named by (requests are applied in name order, and one the leader
   * cannot apply waits an hour by it): storage's, where the caller knows it. Default: this
   * machine's clock.
   */
  now?: () => Date;
  /** Called first when given: learns storage's time if the caller has not had an answer yet. */
  sync?: () => Promise<void>;
}

/** Never written: read only for the Date of its answer (a 404). */
const TIME_PROBE_KEY = 'requests/.time';

/**
 * A `sync` for requests: one read, only while `clock` has seen no answer of storage's yet, so a
 * client's first request is named by storage's time too.
 */
export function storageTimeSync(docs: DocumentStore, clock: { readonly synced: boolean }): () => Promise<void> {
  return async () => {
    if (!clock.synced) await docs.read(TIME_PROBE_KEY);
  };
}

/** Asks the leader to start a manual run of `job`; returns the run id it will have. */
export async function requestRun(docs: DocumentStore, job: string, options: RequestOptions = {}): Promise<string> {
  const id = randomUUID();
  await write(docs, { kind: 'run', job, id }, options);
  return `${job}/manual-${id}`;
}

/** Asks the leader to cancel a run; its workers then drop the run's messages. */
export async function requestCancel(
  docs: DocumentStore,
  runId: string,
  reason = 'cancelled on request',
  options: RequestOptions = {},
): Promise<void> {
  await write(docs, { kind: 'cancel', runId, reason }, options);
}

async function write(docs: DocumentStore, request: EngineRequest, options: RequestOptions): Promise<void> {
  await options.sync?.();
  // Time-ordered keys, so the leader applies requests in the order they were made.
  const key = `${PREFIX}${(options.now?.() ?? new Date()).toISOString()}-${randomUUID()}.json`;
  await docs.write(key, JSON.stringify(request), { ifNoneMatch: '*' }, { abortSignal: options.abortSignal });
}

export async function* pendingRequests(
  docs: DocumentStore,
  options: { abortSignal?: AbortSignal } = {},
): AsyncIterable<{ key: string; request: EngineRequest | undefined }> {
  for await (const key of docs.list(PREFIX, options)) {
    const stored = await docs.read(key, options);
    if (!stored) continue;
    let parsed: EngineRequest | undefined;
    try {
      const result = requestSchema.safeParse(JSON.parse(stored.body));
      parsed = result.success ? result.data : undefined;
    } catch {
      parsed = undefined;
    }
    yield { key, request: parsed };
  }
}
