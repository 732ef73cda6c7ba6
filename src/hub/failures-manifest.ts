import * as z from '../zod';
import type { DocumentStore } from '../fencing/document-store';
import { writeOnce } from '../fencing/write-once';
import { readFailureLog, type ReadFailureLogOptions } from './failure-log';
import type { FailureEntry } from './fold';
import type { FailuresManifest } from './run-output';
import { runKeys } from './run-record';

const entrySchema = z.lazy(() => z.object({ item: z.int(), reason: z.string(), attempts: z.int() }));

/** Both shapes ever written: with the failure log named, or (older) every failure inline. */
const manifestSchema = z.lazy(() =>
  z.object({
    runId: z.string(),
    state: z.enum(['succeeded', 'failed', 'cancelled', 'timed-out']),
    failedCount: z.optional(z.int().check(z.nonnegative())),
    failureParts: z.optional(z.array(z.string())),
    failed: z.optional(z.array(entrySchema)),
    missing: z.array(z.int()),
    missingCount: z.int().check(z.nonnegative()),
    unreadableParts: z.optional(z.array(z.string())),
  }),
);

/**
 * Writes the run's manifest once (`If-None-Match: *`): whoever ends the run first wins, and a
 * repeat finds it there. `failureParts` are the roots of a failure log; the manifest names
 * them, so only retention deletes them, with the manifest.
 */
export function writeFailuresManifest(
  docs: DocumentStore,
  manifest: FailuresManifest & { failureParts: string[] },
  signal?: AbortSignal,
): Promise<void> {
  return writeOnce(docs, runKeys.manifest(manifest.runId), manifest, signal);
}

/** The run's manifest, either shape, with `failedCount` filled in; undefined before the run has one. */
export async function readFailuresManifest(
  docs: DocumentStore,
  runId: string,
  options: { abortSignal?: AbortSignal } = {},
): Promise<FailuresManifest | undefined> {
  const key = runKeys.manifest(runId);
  const stored = await docs.read(key, options);
  if (!stored) return undefined;
  let body: unknown;
  try {
    body = JSON.parse(stored.body);
  } catch {
    throw new Error(`${key} is not JSON`);
  }
  const parsed = manifestSchema.safeParse(body);
  if (!parsed.success) throw new Error(`${key} is not a failures manifest: ${parsed.error.issues[0]?.message ?? ''}`);
  const { failedCount, ...rest } = parsed.data;
  return { ...rest, failedCount: failedCount ?? rest.failed?.length ?? 0 };
}

/**
 * Every failure the manifest gives, with its reason, in bounded memory: from its failure log,
 * or from an older manifest's inline list. Parts storage no longer has go to `onMissing`.
 */
export async function* readFailures(
  docs: DocumentStore,
  manifest: FailuresManifest,
  options: ReadFailureLogOptions = {},
): AsyncGenerator<FailureEntry> {
  if (manifest.failureParts) {
    yield* readFailureLog(docs, manifest.failureParts, options);
    return;
  }
  for (const key of manifest.unreadableParts ?? []) options.onMissing?.(key);
  yield* manifest.failed ?? [];
}

/**
 * The first `limit` failures the manifest gives (or, for an open run, the failure log its record's
 * roots name), and the parts found missing on the way.
 */
export async function firstFailures(
  docs: DocumentStore,
  manifest: FailuresManifest | readonly string[],
  limit: number,
  options: { abortSignal?: AbortSignal } = {},
): Promise<{ failed: FailureEntry[]; unreadableParts: string[] }> {
  const failed: FailureEntry[] = [];
  const unreadableParts: string[] = [];
  if (limit <= 0) return { failed, unreadableParts };
  const read = { ...options, onMissing: (key: string) => unreadableParts.push(key) };
  for await (const entry of Array.isArray(manifest)
    ? readFailureLog(docs, manifest as readonly string[], read)
    : readFailures(docs, manifest as FailuresManifest, read)) {
    failed.push(entry);
    if (failed.length >= limit) break;
  }
  return { failed, unreadableParts };
}
