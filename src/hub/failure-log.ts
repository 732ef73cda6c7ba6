import { randomUUID } from 'node:crypto';
import type { DocumentStore } from '../fencing/document-store';
import type { FailureEntry } from './fold';
import { runKeys } from './run-record';

/**
 * A run's failure log: every failed item with its reason, in the order the items were counted,
 * kept in write-once blobs so that neither the leader nor any reader ever holds all of them.
 *
 * - A **part** (JSON lines of `FailureEntry`) holds the failures one checkpoint counted.
 * - An **index** of level L+1 holds the keys of `FAILURE_LOG_FANOUT` entries of level L (a part
 *   is level 0), in order; its level is in its key, so the log can be grown from keys alone.
 * - The **roots** (the run record's `failureParts`, later the manifest's) are the entries no
 *   index names yet, in order, their levels never rising from left to right.
 *
 * Why this shape: the record must stay small, since every checkpoint rewrites it, and merging
 * parts by reading them back grows with the run. Here a blob is never read back to grow the
 * log, never rewritten (`If-None-Match: *` under a key no blob had) and never deleted, so a
 * stored record or manifest always names blobs that hold exactly what they held when it was
 * written, whatever lands or fails after. The roots keep fewer than `FAILURE_LOG_FANOUT` entries
 * per level: about 15 × log16(parts), 75 keys for a million parts. Reading walks the tree depth
 * first, holding one part and one index per level.
 */
export const FAILURE_LOG_FANOUT = 16;

/** 0 for a part, L for an index of level L. */
export function failureLogLevel(key: string): number {
  const index = /\/failures\/i(\d+)-[^/]*$/.exec(key);
  return index ? Number(index[1]) : 0;
}

export interface AppendFailures {
  runId: string;
  /** The writer's epoch, in the new keys: they say which term wrote them. */
  epoch: number;
  roots: readonly string[];
  failures: readonly FailureEntry[];
}

/**
 * Writes `failures` as one more part, then folds every run of `FAILURE_LOG_FANOUT` equal levels
 * in the roots into an index, and returns the new roots for the caller to store. The blobs are
 * written before the roots that name them are stored; a store that fails leaves them named by
 * nothing, and the roots it kept still name what they did.
 */
export async function appendFailures(docs: DocumentStore, input: AppendFailures, signal?: AbortSignal): Promise<string[]> {
  const { runId, epoch } = input;
  const roots = [...input.roots];
  const part = runKeys.failurePart(runId, epoch, roots.length, uniqueId());
  await writeNew(docs, part, `${input.failures.map((f) => JSON.stringify(f)).join('\n')}\n`, signal);
  roots.push(part);
  for (let full = fullRun(roots); full; full = fullRun(roots)) {
    const children = roots.slice(full.start, full.start + FAILURE_LOG_FANOUT);
    const index = runKeys.failureIndex(runId, full.level + 1, epoch, full.start, uniqueId());
    await writeNew(docs, index, JSON.stringify(children), signal);
    roots.splice(full.start, FAILURE_LOG_FANOUT, index);
  }
  return roots;
}

/**
 * The first run of `FAILURE_LOG_FANOUT` or more roots of one level. A record written before
 * indexes existed may name up to 64 parts; they fold from the oldest, so levels keep falling.
 */
function fullRun(roots: readonly string[]): { start: number; level: number } | undefined {
  let start = 0;
  for (let i = 1; i <= roots.length; i++) {
    if (i < roots.length && failureLogLevel(roots[i]!) === failureLogLevel(roots[start]!)) continue;
    if (i - start >= FAILURE_LOG_FANOUT) return { start, level: failureLogLevel(roots[start]!) };
    start = i;
  }
  return undefined;
}

export interface ReadFailureLogOptions {
  abortSignal?: AbortSignal;
  /** Called for each part or index storage no longer has: what it held is skipped, not guessed. */
  onMissing?: (key: string) => void;
}

/** Every failure the roots name, in the order counted, one part in memory at a time. */
export async function* readFailureLog(
  docs: DocumentStore,
  roots: readonly string[],
  options: ReadFailureLogOptions = {},
): AsyncGenerator<FailureEntry> {
  for (const key of roots) {
    const stored = await docs.read(key, { abortSignal: options.abortSignal });
    if (!stored) {
      options.onMissing?.(key);
      continue;
    }
    if (failureLogLevel(key) > 0) {
      yield* readFailureLog(docs, JSON.parse(stored.body) as string[], options);
      continue;
    }
    for (const line of stored.body.split('\n')) if (line) yield JSON.parse(line) as FailureEntry;
  }
}

function uniqueId(): string {
  return randomUUID().slice(0, 8);
}

async function writeNew(docs: DocumentStore, key: string, body: string, signal?: AbortSignal): Promise<void> {
  await docs.write(key, body, { ifNoneMatch: '*' }, { abortSignal: signal });
}
