import type { DocumentStore } from '../../src/fencing/document-store';
import { readFailures } from '../../src/hub/failures-manifest';
import type { FailureEntry } from '../../src/hub/fold';
import type { FailuresManifest } from '../../src/hub/run-output';

/**
 * Every failure a manifest gives, by item (a duplicate stays, so exact comparisons catch it),
 * for tests of runs small enough to hold them all. A part storage no longer has fails the test.
 */
export async function failuresOf(docs: DocumentStore, manifest: FailuresManifest | undefined): Promise<FailureEntry[]> {
  if (!manifest) return [];
  const out: FailureEntry[] = [];
  const onMissing = (key: string) => {
    throw new Error(`the manifest names ${key}, which storage no longer has`);
  };
  for await (const entry of readFailures(docs, manifest, { onMissing })) out.push(entry);
  return out.sort((a, b) => a.item - b.item);
}
