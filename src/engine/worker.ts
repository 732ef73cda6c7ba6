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
  type WorkMessage,
} from './messages';
import { describeIssue } from '../jobs/error-text';
import type { ItemOutcome } from '../jobs/item-outcome';
import type { RunStateCache } from './run-state-cache';
import { retryDelaySeconds, retryScheduleOf } from '../jobs/retry-policy';
import type { ItemStartGatePort } from './item-start-gate';

export interface WorkerDeps {
  jobs: ReadonlyMap<string, JobDefinition>;
  docs: DocumentStore;
  /** The work queue the messages come from: failed items go back to it for their next try. */
  work: QueuePort;
  results: QueuePort;
  poison: QueuePort;
  runs: RunStateCache;
  /**
   * The host's maxDequeueCount: the delivery of one message on which its failures become final
   * whatever the job's retries say (the host moves it to the poison queue after it). Also the
   * job's `retry.attempts` when the job sets none.
   */
  maxAttempts: number;
  /**
   * How long one invocation may run before the host stops it (host.json `functionTimeout`, less
   * what sending the result takes); undefined when unbounded. A message's items run one after
   * another, so the worker starts no item that could not end within it, and sends the items it
   * did not start back to the queue as a message of their own, untried.
   */
  invocationBudgetMs?: number;
  /**
   * Asked before each item starts and told how long its `process` held the event loop: on the
   * leader's instance it holds back an item whose hold would delay a due run (`ItemStartGate`).
   */
  gate?: ItemStartGatePort;
  /** Milliseconds on a monotonic clock; `performance.now` unless a test gives its own. */
  now?: () => number;
  log?: (level: 'info' | 'warn', message: string) => void;
}

/** Kept back from the host's `functionTimeout` for what follows the items: the result, and the items sent back. */
export const INVOCATION_MARGIN_MS = 15_000;

export type WorkOutcome =
  /** `retrying` items went back to the work queue (failed, or not started in time) for a later try; `failed` are final. */
  | { kind: 'processed'; succeeded: number; failed: number; retrying: number }
  /** The message cannot be handled here now: the caller must fail the invocation so the host redelivers. */
  | { kind: 'retry'; failed: number; firstError: string }
  | { kind: 'dropped'; reason: string }
  | { kind: 'poisoned'; reason: string };

/** The kinds of message version 1 has; a work queue carries only work and ticks, but any is known. */
const KNOWN_KINDS = new Set(['work', 'tick', 'result', 'poison']);

/**
 * What a message that another version of Baton wrote is (`a rebalance message`, `a message of
 * version 2`), or undefined when this version should judge it: a rolling deploy runs two
 * versions on one queue, and what the newer one adds is not malformed. Only a plausible
 * envelope counts: a whole-number version, and a kind that is a lowercase name.
 */
function fromAnotherVersion(value: unknown): string | undefined {
  if (value === null || typeof value !== 'object' || Array.isArray(value)) return undefined;
  const { v, t } = value as { v?: unknown; t?: unknown };
  if (!Number.isSafeInteger(v) || (v as number) < 1) return undefined;
  if (v !== 1) return `a message of version ${v as number}`;
  if (typeof t === 'string' && /^[a-z][a-z0-9-]{0,39}$/.test(t) && !KNOWN_KINDS.has(t)) return `a ${t} message`;
  return undefined;
}

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
  const now = deps.now ?? (() => performance.now());
  const startedAt = now();
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
  const foreign = fromAnotherVersion(body.value);
  // The host redelivers it, to an instance that may know it; after its last delivery the host
  // moves it to the poison queue, where the leader keeps it with a reason.
  if (foreign) return { kind: 'retry', failed: 0, firstError: `${foreign}, which this version of Baton does not know` };
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

  // Tries so far: those of earlier messages of these items, and this message's own deliveries.
  const attempt = (message.tried ?? 0) + meta.dequeueCount;
  const retry = retryScheduleOf(job.retry, deps.maxAttempts);
  const final = attempt >= retry.attempts || meta.dequeueCount >= deps.maxAttempts;
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
  const itemBoundMs = (job.hookTimeouts.processSeconds + job.hookTimeouts.graceSeconds) * 1000;
  // Where the items this invocation may not start begin (items.length: every item starts).
  let startsUntil = items.length;
  let longestHoldMs = 0;
  // Time spent at the start gate: the worker's choice, not the items' time (`ms` leaves it out).
  let gatedMs = 0;
  // The first item always starts (start-up checked that one fits); a later one only if it can end in time.
  const outOfTime = (offset: number): boolean =>
    offset > 0 && deps.invocationBudgetMs !== undefined && now() - startedAt + itemBoundMs > deps.invocationBudgetMs;
  try {
    for (const [offset, item] of items.entries()) {
      if (outOfTime(offset)) {
        startsUntil = offset;
        break;
      }
      const asked = now();
      const gate = await deps.gate?.beforeItem(job.name, stop.signal);
      gatedMs += now() - asked;
      if (outOfTime(offset)) {
        gate?.dropped();
        startsUntil = offset;
        break;
      }
      const itemIndex = message.first + offset;
      // `process` runs at once, up to its first await: the time that takes is its hold on the loop.
      const began = now();
      const pending = processItem(job, item, { runId: message.run, itemIndex, attempt, signal: stop.signal });
      const holdMs = now() - began;
      gate?.started(holdMs);
      longestHoldMs = Math.max(longestHoldMs, holdMs);
      const outcome = await pending;
      if (!outcome.ok) firstError ??= outcome.e;
      outcomes.push(outcome);
    }
  } finally {
    clearInterval(watch);
    signal.removeEventListener('abort', forward);
  }
  const failed = outcomes.filter((o) => !o.ok).length;
  // The items not started go back untried, at once: this delivery was no try of theirs.
  const unstarted = items.length - startsUntil;
  if (unstarted > 0) {
    const rest: WorkMessage = {
      v: 1,
      t: 'work',
      run: message.run,
      job: message.job,
      first: message.first + startsUntil,
      count: unstarted,
      items: items.slice(startsUntil),
      ...(attempt - 1 > 0 ? { tried: attempt - 1 } : {}),
    };
    await deps.work.send(await encodeWithClaimCheck(rest, 'items', deps.docs, { abortSignal: signal }), { abortSignal: signal });
    deps.log?.(
      'info',
      `${unstarted} item(s) of run ${message.run} sent back unstarted: the invocation would outlive the host's functionTimeout`,
    );
  }
  // Before the last try only successes are reported; the failed items go back to the queue,
  // hidden until their next try is due. Sent before this message completes: if this worker dies
  // in between, the host redelivers the message and the items are tried twice, which the
  // leader's count of each index once makes harmless.
  let retrying: { items: number[]; inMs: number } | undefined;
  if (failed > 0 && !final) {
    // The queue hides a message for whole seconds.
    const hiddenSeconds = Math.ceil(retryDelaySeconds(retry, attempt));
    const again = outcomes.flatMap((o, offset) => (o.ok ? [] : [offset]));
    for (const range of contiguous(again)) {
      const retryMessage: WorkMessage = {
        v: 1,
        t: 'work',
        run: message.run,
        job: message.job,
        first: message.first + range.from,
        count: range.count,
        items: items.slice(range.from, range.from + range.count),
        tried: attempt,
      };
      const text = await encodeWithClaimCheck(retryMessage, 'items', deps.docs, { abortSignal: signal });
      await deps.work.send(text, { abortSignal: signal, visibilityTimeoutSeconds: hiddenSeconds });
    }
    retrying = { items: again.map((offset) => message.first + offset), inMs: hiddenSeconds * 1000 };
    deps.log?.(
      'info',
      `${failed} item(s) of run ${message.run} failed try ${attempt} of ${retry.attempts}; ` +
        `trying again in ${hiddenSeconds} s: ${firstError ?? 'failed'}`,
    );
  }
  const report = retrying ? outcomes.filter((o) => o.ok) : outcomes;
  // The leader's note of what is out again: the failed items, and those not started (due at once;
  // the later of the two times stands, so neither looks like a straggler early).
  const backAgain =
    unstarted > 0
      ? {
          items: [...(retrying?.items ?? []), ...Array.from({ length: unstarted }, (_, k) => message.first + startsUntil + k)],
          inMs: retrying?.inMs ?? 0,
        }
      : retrying;
  if (report.length > 0 || backAgain) {
    const result: ResultMessage = {
      v: 1,
      t: 'result',
      run: message.run,
      job: message.job,
      ...(report.length > 0 ? { outcomes: report, ms: Math.round(now() - startedAt - gatedMs) } : {}),
      ...(longestHoldMs >= 1 ? { held: Math.round(longestHoldMs) } : {}),
      ...(backAgain ? { retrying: backAgain } : {}),
    };
    await deps.results.send(await encodeWithClaimCheck(result, 'outcomes', deps.docs, { abortSignal: signal }), {
      abortSignal: signal,
    });
  }
  const retried = retrying?.items.length ?? 0;
  return { kind: 'processed', succeeded: outcomes.length - failed, failed: failed - retried, retrying: retried + unstarted };
}

/** Runs of consecutive offsets, in order. */
function contiguous(offsets: readonly number[]): { from: number; count: number }[] {
  const ranges: { from: number; count: number }[] = [];
  for (const offset of offsets) {
    const last = ranges.at(-1);
    if (last && last.from + last.count === offset) last.count++;
    else ranges.push({ from: offset, count: 1 });
  }
  return ranges;
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
