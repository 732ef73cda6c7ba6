import { ConcurrentUpdateError } from '../errors';
import type { DocumentStore } from './document-store';

/**
 * Writes a document that must exist at most once (`If-None-Match: *`); a copy already there means
 * an earlier try made it. Outputs and manifests of both engines are written this way.
 */
export async function writeOnce(docs: DocumentStore, key: string, value: unknown, signal?: AbortSignal): Promise<void> {
  await writeOnceText(docs, key, JSON.stringify(value), signal);
}

/** `writeOnce` of text as it is: a job's attachments. */
export async function writeOnceText(docs: DocumentStore, key: string, body: string, signal?: AbortSignal): Promise<void> {
  try {
    await docs.write(key, body, { ifNoneMatch: '*' }, { abortSignal: signal });
  } catch (err) {
    if (!(err instanceof ConcurrentUpdateError)) throw err;
  }
}
