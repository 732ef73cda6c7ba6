import type { DocumentStore } from '../fencing/document-store';
import type { JobDefinition } from '../jobs/job-definition';
import { processItem } from '../jobs/process-item';
import type { QueuePort } from '../queue/queue-port';
import { isTerminal } from '../hub/run-record';
import {
  ClaimMissingError,
  encodeWithClaimCheck,
  loadClaim,
  parseBody,
  truncate,
  workMessageSchema,
  type PoisonNote,
  type ResultMessage,
} from './messages';
import { describeIssue } from '../jobs/error-text';
import type { ItemOutcome } from '../jobs/item-outcome';
import type { RunStateCache } from './run-state-cache';

export interface WorkerDeps {
  jobs: ReadonlyMap<string, JobDefinition>;
  docs: DocumentStore;
  results: QueuePort;
  poison: QueuePort;
  runs: RunStateCache;
  /** The host's maxDequeueCount: the attempt on which failures become final. */
  maxAttempts: number;
  log?: (level: 'info' | 'warn', message: string) => void;
}

export type WorkOutcome =
  | { kind: 'processed'; succeeded: number; failed: number }
  /** Some items failed before the last attempt: the caller must fail the invocation so the host redelivers. */
  | { kind: 'retry'; failed: number; firstError: string }
  | { kind: 'dropped'; reason: string }
  | { kind: 'poisoned'; reason: string };

/**
 * Handles one work message as a queue-triggered function would. A message it cannot use goes
 * to the poison queue with a reason (never silently away); a message of an ended run is
 * dropped; otherwise each item is processed and one result message carries the outcomes.
 */
export async function handleWorkMessage(
  raw: unknown,
  meta: { dequeueCount: number; signal?: AbortSignal },
  deps: WorkerDeps,
): Promise<WorkOutcome> {
  const startedAt = performance.now();
  const signal = meta.signal ?? new AbortController().signal;
  const text = typeof raw === 'string' ? raw : safeStringify(raw);
  const poison = async (reason: string, run?: string): Promise<WorkOutcome> => {
    const note: PoisonNote = { v: 1, t: 'poison', reason, body: truncate(text), ...(run ? { run } : {}) };
    await deps.poison.send(JSON.stringify(note), { abortSignal: signal });
    deps.log?.('warn', `work message sent to ${deps.poison.name}: ${reason}`);
    return { kind: 'poisoned', reason };
  };

  const body = parseBody(raw);
  if (!body.ok) return poison(body.reason);
  const parsed = workMessageSchema.safeParse(body.value);
  if (!parsed.success) return poison(`wrong shape: ${describeIssue(parsed.error)}`);
  const message = parsed.data;
  const job = deps.jobs.get(message.job);
  // Possibly a rolling deploy: another instance (or this one, updated) may know the job. Let the
  // host retry; if nobody does, the host's poison queue tells the leader these items failed.
  if (!job) return { kind: 'retry', failed: message.count, firstError: `job ${message.job} is not registered on this instance` };
  const run = await deps.runs.get(message.run, { abortSignal: signal });
  if (!run) return poison(`unknown run ${message.run}`, message.run);
  if (run.job !== message.job) return poison(`run ${message.run} belongs to job ${run.job}, not ${message.job}`, message.run);
  if (isTerminal(run.state)) {
    deps.log?.('info', `dropped a work message of run ${message.run}: the run is ${run.state}`);
    return { kind: 'dropped', reason: `run is ${run.state}` };
  }
  if (message.first + message.count > run.planned) {
    return poison(
      `items ${message.first}..${message.first + message.count - 1} are out of range: the run planned ${run.planned}`,
      message.run,
    );
  }

  let items: unknown[];
  try {
    items = message.items ?? (await loadClaimedItems(message.claim as string, message.count, deps.docs, signal));
  } catch (err) {
    if (err instanceof ClaimMissingError || err instanceof ClaimShapeError) return poison(err.message, message.run);
    // Unreadable now means unreadable on every delivery: retrying would only hide the reason.
    if (err instanceof SyntaxError) return poison(`claim-check blob ${message.claim} is not JSON`, message.run);
    throw err;
  }

  const attempt = meta.dequeueCount;
  const final = attempt >= deps.maxAttempts;
  const outcomes: ItemOutcome[] = [];
  let firstError: string | undefined;
  // `process` sees its signal abort when the run is cancelled or times out meanwhile.
  const stop = new AbortController();
  const forward = () => stop.abort(signal.reason);
  signal.addEventListener('abort', forward, { once: true });
  const watch = setInterval(() => {
    deps.runs.get(message.run).then(
      (view) => {
        if (view && isTerminal(view.state)) stop.abort(new Error(`run ${message.run} is ${view.state}`));
      },
      () => undefined,
    );
  }, deps.runs.ttlMs);
  watch.unref?.();
  try {
    for (const [offset, item] of items.entries()) {
      const itemIndex = message.first + offset;
      const outcome = await processItem(job, item, { runId: message.run, itemIndex, attempt, signal: stop.signal });
      if (!outcome.ok) firstError ??= outcome.e;
      outcomes.push(outcome);
    }
  } finally {
    clearInterval(watch);
    signal.removeEventListener('abort', forward);
  }
  const failed = outcomes.filter((o) => !o.ok).length;
  // Before the last attempt only successes are reported; the failed items come back with the
  // message. Successes reported twice are harmless: the leader counts each index once.
  const report = final ? outcomes : outcomes.filter((o) => o.ok);
  if (report.length > 0) {
    const ms = Math.round(performance.now() - startedAt);
    const result: ResultMessage = { v: 1, t: 'result', run: message.run, job: message.job, outcomes: report, ms };
    await deps.results.send(await encodeWithClaimCheck(result, 'outcomes', deps.docs, { abortSignal: signal }), {
      abortSignal: signal,
    });
  }
  if (failed > 0 && !final) return { kind: 'retry', failed, firstError: firstError ?? 'failed' };
  return { kind: 'processed', succeeded: outcomes.length - failed, failed };
}

class ClaimShapeError extends Error {}

async function loadClaimedItems(key: string, count: number, docs: DocumentStore, signal: AbortSignal): Promise<unknown[]> {
  const items = await loadClaim(key, docs, { abortSignal: signal });
  if (!Array.isArray(items) || items.length !== count) {
    throw new ClaimShapeError(`claim-check blob ${key} does not hold ${count} items`);
  }
  return items;
}

function safeStringify(value: unknown): string {
  try {
    return JSON.stringify(value) ?? String(value);
  } catch {
    return String(value);
  }
}
