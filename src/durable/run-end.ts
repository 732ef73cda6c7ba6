import * as z from '../zod';
import type { FailuresManifest } from '../hub/run-output';
import { writeFailuresManifest } from '../hub/failures-manifest';
import { indexRun } from '../hub/run-index';
import { finalizeContext } from '../hub/finalize-context';
import { errorText } from '../jobs/error-text';
import { messageOf, StaleEpochError } from '../errors';
import type { DocumentStore } from '../fencing/document-store';
import type { JobDefinition } from '../jobs/job-definition';
import type { RunEndTelemetry } from '../telemetry/run-telemetry';
import {
  isTerminal,
  newRunRecord,
  runKeys,
  runCountersSchema,
  transition,
  type RunRecord,
  type TerminalRunState,
} from '../hub/run-record';
import { isOpenStatus, type DurableClientPort, type InstanceView } from './client-port';
import { runInputSchema } from './contracts';
import { chunkInstancePrefix, runInstanceId } from './instance-ids';
import { DURABLE_EPOCH } from './names';
import { ForeignRunError, runRecords } from './run-records';

/**
 * How the starter ends durable runs that their orchestration will not end: past their deadline,
 * cancelled, or left behind by an orchestration that failed, was terminated or is gone. Every
 * rule here writes the run record first and stops orchestrations second, so a crash in between
 * leaves a record that has ended beside an orchestration the next tick stops, never the reverse.
 */
export interface RunEndDeps {
  client: DurableClientPort;
  /** The hub's `<hub>-runs` documents. */
  docs: DocumentStore;
  now: Date;
  signal?: AbortSignal;
  log?: (level: 'info' | 'warn', message: string) => void;
  /** A step that failed without stopping the tick (a terminate): reported, and tried again on the next tick. */
  report: (what: string, err: unknown) => void;
  /** Told of each run this ends, as the queue engine's leader tells it. */
  telemetry?: RunEndTelemetry;
}

/** The states the starter ends a run in while its orchestration may still be working: it stops that orchestration. */
const STOPPED_BY_STARTER: ReadonlySet<string> = new Set<TerminalRunState>(['cancelled', 'timed-out']);

/** The run orchestrator's `customStatus`, as far as it can be trusted (another version's may differ). */
const progressSchema = z.lazy(() =>
  z.object({
    done: z.int().check(z.nonnegative()),
    failed: z.int().check(z.nonnegative()),
    total: z.int().check(z.nonnegative()),
  }),
);

/**
 * Counters with what the orchestration reported as done: those items' outcomes live in its
 * history and end with it, but how many succeeded and failed is known and kept.
 */
function withProgress(counters: RunRecord['counters'], customStatus: unknown): RunRecord['counters'] {
  const progress = progressSchema.safeParse(customStatus);
  if (!progress.success || progress.data.total !== counters.planned || progress.data.done > progress.data.total) return counters;
  const { done, failed } = progress.data;
  return {
    ...counters,
    succeeded: Math.max(counters.succeeded, done - failed),
    failed: Math.max(counters.failed, failed),
  };
}

/** The manifest of a run the starter ended: its items' failure reasons never left the orchestration. */
function manifestOf(record: RunRecord): FailuresManifest & { failureParts: string[] } {
  const { planned, succeeded, failed } = record.counters;
  return {
    runId: record.runId,
    state: record.state as TerminalRunState,
    failedCount: 0,
    failureParts: [],
    missing: [],
    missingCount: Math.max(0, planned - succeeded - failed),
  };
}

/**
 * A record for a run whose orchestration exists but never planned (so never wrote one): created
 * when the starter has to end such a run, so that `baton runs` shows why, and so that a split
 * that still comes finds the run ended and does nothing.
 */
export function recordOfInstance(runId: string, job: string, view: InstanceView, timeoutSeconds: number, now: Date): RunRecord {
  const input = runInputSchema.safeParse(view.input);
  const occurrence = input.success ? input.data.occurrence : null;
  return newRunRecord({
    runId,
    job,
    trigger: input.success ? input.data.trigger : occurrence ? 'schedule' : 'manual',
    occurrence: occurrence ? new Date(occurrence) : undefined,
    now: view.createdTime ?? now,
    timeoutSeconds,
  });
}

export interface EndOptions {
  /** Leave a run that is finalizing alone (its output may already exist): cancel does, as in the queue engine. */
  keepFinalizing?: boolean;
  /** The orchestration's `customStatus`, for the counters. */
  progress?: unknown;
  /** The record to end when there is none yet. */
  create?: RunRecord;
  /** More fields for the ended record, from what it was. */
  fields?: (current: RunRecord) => Partial<RunRecord>;
  /** Write the starter's manifest (not when the run already has one). Default true. */
  manifest?: boolean;
}

/**
 * Ends the run's record in `to` with `reason`, before anything else. Returns the record as
 * this call ended it, or undefined when it had ended already (or is finalizing and
 * `keepFinalizing`, or is missing and there is nothing to create). The manifest is named in the
 * same write and written after it; a tick that dies in between leaves the name, and
 * `settleRun` writes the manifest it names. A record a queue-engine leader wrote is refused
 * with `ForeignRunError`.
 */
export async function endDurableRun(
  deps: RunEndDeps,
  runId: string,
  to: TerminalRunState,
  reason: string,
  options: EndOptions = {},
): Promise<RunRecord | undefined> {
  const key = runKeys.record(runId);
  const manifest = options.manifest ?? true;
  let ended: RunRecord | undefined;
  // Only used when there is no record; its entries are skipped by readers if one turns up.
  if (options.create) await indexRun(deps.docs, DURABLE_EPOCH, options.create, { abortSignal: deps.signal });
  try {
    await runRecords(deps.docs).update(
      key,
      DURABLE_EPOCH,
      (found) => {
        // `update` may call this more than once; the last call's answer is what was written.
        ended = undefined;
        const current = found ?? options.create;
        if (!current || isTerminal(current.state)) return undefined;
        if (options.keepFinalizing && current.state === 'finalizing') return undefined;
        const fields = options.fields?.(current) ?? {};
        ended = {
          ...transition(current, to, deps.now, reason),
          counters: withProgress(current.counters, options.progress),
          ...(manifest ? { manifestKey: runKeys.manifest(runId) } : {}),
          ...fields,
          endReason: reason,
        };
        return ended;
      },
      { abortSignal: deps.signal },
    );
  } catch (err) {
    if (err instanceof StaleEpochError) throw new ForeignRunError(runId, err.storedEpoch);
    throw err;
  }
  const done = ended as RunRecord | undefined;
  if (!done) return undefined;
  deps.telemetry?.runEnded(done);
  if (manifest) await writeFailuresManifest(deps.docs, manifestOf(done), deps.signal);
  deps.log?.('warn', `run ${runId} ${to}: ${reason}`);
  return done;
}

/**
 * Terminates the run's orchestration (when `run` and it is open) and every open chunk of it
 * (terminating a parent does not stop its sub-orchestrations). A terminate that fails is
 * reported and left for the next tick. Returns whether nothing is left open.
 */
export async function stopRunInstances(
  deps: RunEndDeps,
  runInstance: string,
  open: readonly InstanceView[],
  reason: string,
  options: { run: boolean },
): Promise<boolean> {
  const chunks = chunkInstancePrefix(runInstance);
  let stopped = true;
  for (const view of open) {
    const ours = (options.run && view.instanceId === runInstance) || view.instanceId.startsWith(chunks);
    if (!ours || !isOpenStatus(view.runtimeStatus)) continue;
    try {
      await deps.client.terminate(view.instanceId, reason);
    } catch (err) {
      if (deps.signal?.aborted) throw err;
      stopped = false;
      deps.report(`terminate ${view.instanceId}`, err);
    }
  }
  return stopped;
}

export interface SettleTarget {
  runId: string;
  /** The job's name, and its definition while this instance still has it. */
  job: string;
  definition: JobDefinition | undefined;
  /** The run's orchestration as just read (before its record), or undefined when Durable has none. */
  view: InstanceView | undefined;
  /** The job's open instances, runs and chunks; listed only when something has to be stopped. */
  open: () => Promise<readonly InstanceView[]>;
}

export interface Settled {
  /** The run may still do work: it counts for the job's overlap policy. */
  running: boolean;
  /** Keep watching it on the next tick: it is running, or an orchestration of it is still to be stopped. */
  watch: boolean;
  /** Set when this call ended the run. */
  ended?: { state: TerminalRunState; reason: string };
}

const UNTOUCHED: Settled = { running: false, watch: false };

/**
 * One run, once per tick, until it has ended and nothing of it is left running:
 * - open orchestration, record open: past the record's deadline (not while finalizing, as in the
 *   queue engine) the record ends `timed-out` and the orchestration is stopped; otherwise it runs on;
 * - open orchestration, no record yet (it never planned): the same, with a deadline counted from
 *   the instance's creation, when the job is still defined;
 * - orchestration ended (failed, terminated, completed) or gone, record still open: the record
 *   ends with what happened to it; a run that was finalizing ends as its output says when the
 *   output was written;
 * - record ended by the starter (cancelled, timed-out) and an orchestration of it still open:
 *   stopped again (an earlier terminate failed); chunks left running by an ended run, too.
 * The caller reads the orchestration before the record: an orchestration that ends only after
 * it writes the record's end is then never mistaken for one that ended without it.
 */
export async function settleRun(deps: RunEndDeps, target: SettleTarget): Promise<Settled> {
  const { runId, view } = target;
  const instance = runInstanceId(runId);
  const open = !!view && isOpenStatus(view.runtimeStatus);
  const doc = await runRecords(deps.docs).read(runKeys.record(runId), { abortSignal: deps.signal });
  if (doc && doc.epoch !== DURABLE_EPOCH) return UNTOUCHED; // a queue-engine leader's run: not ours
  const record = doc?.value;
  const unregistered = target.definition ? '' : `; job ${target.job} is no longer defined`;

  if (record && isTerminal(record.state)) {
    await writeNamedManifest(deps, record);
    const stopRun = open && STOPPED_BY_STARTER.has(record.state);
    // A run that ended normally has no chunk left; one whose orchestration ended early may have.
    const stopChunks = stopRun || !open;
    if (!stopRun && !(stopChunks && (await hasOpenChunks(target, instance)))) return UNTOUCHED;
    const stopped = await stopRunInstances(deps, instance, await target.open(), record.endReason ?? record.state, {
      run: stopRun,
    });
    return { running: false, watch: !stopped };
  }

  if (!record) {
    if (!view) return UNTOUCHED; // never started (a start the starter meant but did not make), or purged
    const timeout = target.definition?.timeoutSeconds;
    if (open) {
      const deadline = timeout !== undefined && view.createdTime ? view.createdTime.getTime() + timeout * 1000 : undefined;
      if (deadline === undefined || deps.now.getTime() <= deadline) return { running: true, watch: true };
      const reason = `its orchestration was still ${view.runtimeStatus} at its deadline ${new Date(deadline).toISOString()}, before the run was planned`;
      return stopAfterEnd(deps, target, 'timed-out', reason, recordOfInstance(runId, target.job, view, timeout ?? 0, deps.now));
    }
    const { state, how, detail } = endedBy(view, instance);
    const reason = reasonOf(how, ' before the run was planned', detail, unregistered);
    return stopAfterEnd(deps, target, state, reason, recordOfInstance(runId, target.job, view, timeout ?? 0, deps.now));
  }

  if (open) {
    if (record.state === 'finalizing' || deps.now.getTime() <= Date.parse(record.deadlineAt))
      return { running: true, watch: true };
    const reason = `still ${record.state} at its deadline ${record.deadlineAt}${unregistered}`;
    return stopAfterEnd(deps, target, 'timed-out', reason);
  }

  const { state, how, detail } = endedBy(view, instance);
  if (record.state === 'finalizing') {
    const output = await readOutput(deps.docs, runId, deps.signal);
    if (output) {
      const reason = reasonOf(how, ' while finalizing, after writing the output', detail, unregistered);
      return endAsOutput(deps, target, record, output, reason);
    }
  }
  const where =
    record.state === 'finalizing' ? ' while finalizing, before writing the output' : ` while the run was ${record.state}`;
  return stopAfterEnd(deps, target, state, reasonOf(how, where, detail, unregistered));
}

/** Ends the record, then stops what is left of the run. */
async function stopAfterEnd(
  deps: RunEndDeps,
  target: SettleTarget,
  state: TerminalRunState,
  reason: string,
  create?: RunRecord,
): Promise<Settled> {
  const ended = await endDurableRun(deps, target.runId, state, reason, { progress: target.view?.customStatus, create });
  if (!ended) return { running: true, watch: true }; // changed meanwhile (another tick, or the orchestration): look again next tick
  const instance = runInstanceId(target.runId);
  const stopRun = !!target.view && isOpenStatus(target.view.runtimeStatus);
  const stopped =
    stopRun || (await hasOpenChunks(target, instance))
      ? await stopRunInstances(deps, instance, await target.open(), reason, { run: stopRun })
      : true;
  return { running: false, watch: !stopped, ended: { state, reason } };
}

async function hasOpenChunks(target: SettleTarget, runInstance: string): Promise<boolean> {
  const prefix = chunkInstancePrefix(runInstance);
  return (await target.open()).some((v) => v.instanceId.startsWith(prefix) && isOpenStatus(v.runtimeStatus));
}

/**
 * How an orchestration that is no longer open ended: the run state that follows, what happened,
 * and its error or termination reason.
 */
function endedBy(view: InstanceView | undefined, instance: string): { state: TerminalRunState; how: string; detail: string } {
  if (!view) return { state: 'failed', how: `its orchestration ${instance} no longer exists`, detail: '' };
  const detail = describeOutput(view.output);
  switch (view.runtimeStatus) {
    case 'Terminated':
      return { state: 'cancelled', how: 'its orchestration was terminated', detail };
    case 'Canceled':
      return { state: 'cancelled', how: 'its orchestration was canceled', detail };
    case 'Completed':
      return { state: 'failed', how: 'its orchestration completed without ending the run', detail: '' };
    case 'Failed':
      return { state: 'failed', how: 'its orchestration failed', detail };
    default:
      return { state: 'failed', how: `its orchestration ended ${view.runtimeStatus}`, detail };
  }
}

function reasonOf(how: string, where: string, detail: string, unregistered: string): string {
  return `${how}${where}${detail ? `: ${detail}` : ''}${unregistered}`;
}

/** A failed orchestration's error or a terminated one's reason, on one line with secrets masked. */
function describeOutput(output: unknown): string {
  if (output === undefined || output === null || output === '') return '';
  let text: string;
  try {
    text = typeof output === 'string' ? output : (JSON.stringify(output) ?? String(output));
  } catch {
    text = String(output);
  }
  return errorText(text.split('\n')[0] ?? '');
}

const outputSchema = z.lazy(() =>
  z.object({
    state: z.enum(['succeeded', 'failed']),
    counters: runCountersSchema,
    output: z.unknown(),
  }),
);

async function readOutput(docs: DocumentStore, runId: string, signal?: AbortSignal) {
  const stored = await docs.read(runKeys.output(runId), { abortSignal: signal });
  if (!stored) return undefined;
  let body: unknown;
  try {
    body = JSON.parse(stored.body);
  } catch {
    return undefined;
  }
  const parsed = outputSchema.safeParse(body);
  return parsed.success ? parsed.data : undefined;
}

/**
 * A run whose finalize activity wrote the output but whose orchestration ended before the
 * record did: it ends the way its output says, with the output's counters, and the job's
 * `finalize` hook (idempotent by the run id, as its contract says) gets its call.
 */
async function endAsOutput(
  deps: RunEndDeps,
  target: SettleTarget,
  record: RunRecord,
  output: z.infer<typeof outputSchema>,
  reason: string,
): Promise<Settled> {
  const hasManifest = (await deps.docs.read(runKeys.manifest(record.runId), { abortSignal: deps.signal })) !== undefined;
  let finalizeError: string | null = null;
  const job = target.definition;
  if (!job) finalizeError = `job ${target.job} is no longer defined: its finalize hook was not called`;
  else if (job.finalize) {
    const { planned, succeeded, failed } = output.counters;
    try {
      await job.finalize(
        output.output,
        finalizeContext(
          deps.docs,
          record.runId,
          output.state,
          { planned, succeeded, failed },
          deps.signal ?? new AbortController().signal,
        ),
      );
    } catch (err) {
      if (deps.signal?.aborted) throw err;
      finalizeError = errorText(messageOf(err));
    }
  }
  const ended = await endDurableRun(deps, record.runId, output.state, reason, {
    manifest: false,
    fields: (current) => ({
      counters: output.counters,
      outputKey: runKeys.output(record.runId),
      manifestKey: hasManifest ? runKeys.manifest(record.runId) : current.manifestKey,
      finalizeError: finalizeError ?? current.finalizeError,
    }),
  });
  if (!ended) return { running: true, watch: true };
  const stopped = (await hasOpenChunks(target, runInstanceId(record.runId)))
    ? await stopRunInstances(deps, runInstanceId(record.runId), await target.open(), reason, { run: false })
    : true;
  return { running: false, watch: !stopped, ended: { state: output.state, reason } };
}

/**
 * The manifest a record the starter ended names, when a tick died between the two writes. Only
 * records without an output: a finalized run's manifest is written before its record ends.
 */
async function writeNamedManifest(deps: RunEndDeps, record: RunRecord): Promise<void> {
  if (record.manifestKey !== runKeys.manifest(record.runId) || record.outputKey !== null) return;
  if (await deps.docs.read(record.manifestKey, { abortSignal: deps.signal })) return;
  await writeFailuresManifest(deps.docs, manifestOf(record), deps.signal);
}
