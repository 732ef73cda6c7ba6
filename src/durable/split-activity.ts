import { randomInt } from 'node:crypto';
import { ConcurrentUpdateError } from '../errors';
import { PlanError } from '../jobs/plan-item';
import { isTerminal, newRunRecord, runKeys, transition, type RunRecord } from '../hub/run-record';
import { indexRun } from '../hub/run-index';
import { redactSecrets } from '../redact';
import { nowOf, signalOf, type DurableActivityDeps } from './activity-deps';
import { splitInputSchema, type SplitResult } from './contracts';
import { requireJob } from './jobs';
import { DURABLE_EPOCH } from './names';
import { writePlan } from './plan-writer';
import { assertDurableRecord, deleteOtherPlans, runRecords, runResultOf } from './run-records';
import { chunkItemsFor, DEFAULT_DURABLE_SETTINGS } from './settings';
import { dueAtOf } from '../hub/occurrence-ledger';

/**
 * The split activity: creates the run record (`If-None-Match: *`, so one per run id whoever
 * asks), writes the plan, and records it. Activities run at least once, so it is safe to repeat:
 * - a run that has ended reports `ended` and does nothing (an orchestration restarted for an
 *   old occurrence cannot redo its run);
 * - a run already planned reports that plan, without splitting again;
 * - each attempt writes its plan under its own `plan/e<n>/` (a random n), and only the attempt
 *   whose record write lands has its plan used; two attempts at once (a slow split outliving
 *   its activity message) cannot interleave their blobs even if `split` is not deterministic.
 * A `split` that throws, or yields an item the job rejects, ends the run `failed` with the
 * reason, as in the queue engine; storage errors are thrown, for Durable's retry policy.
 */
export function createSplitActivity(deps: DurableActivityDeps): (input: unknown) => Promise<SplitResult> {
  return async (raw) => {
    const input = splitInputSchema.parse(raw);
    const job = requireJob(deps.jobs, input.job);
    const signal = signalOf(deps);
    const records = runRecords(deps.docs);
    const key = runKeys.record(input.runId);
    let doc = await records.read(key, { abortSignal: signal });
    if (!doc) {
      const occurrence = input.occurrence ? new Date(input.occurrence) : undefined;
      const record = newRunRecord({
        runId: input.runId,
        job: job.name,
        trigger: input.trigger,
        occurrence,
        ...(occurrence ? { dueAt: dueAtOf(job, occurrence) } : {}),
        now: nowOf(deps),
        timeoutSeconds: job.timeoutSeconds,
      });
      await indexRun(deps.docs, DURABLE_EPOCH, record, { abortSignal: signal });
      try {
        doc = await records.create(key, DURABLE_EPOCH, record, { abortSignal: signal });
        deps.telemetry?.runStarted(record);
      } catch (err) {
        if (!(err instanceof ConcurrentUpdateError)) throw err;
        doc = await records.read(key, { abortSignal: signal });
        if (!doc) throw err;
      }
    }
    if (isTerminal(doc.value.state)) return { kind: 'ended', result: runResultOf(doc.value) };
    assertDurableRecord(input.runId, doc);
    if (doc.value.state !== 'planning') return planOf(doc.value);

    const chunkItems = chunkItemsFor({ ...DEFAULT_DURABLE_SETTINGS, chunkItems: input.chunkItems }, job.itemsPerMessage);
    const planEpoch = randomInt(1, 2 ** 31 - 1);
    let plan: { planned: number; chunks: number };
    try {
      plan = await writePlan(deps.docs, job, doc.value, planEpoch, chunkItems, signal);
    } catch (err) {
      if (!(err instanceof PlanError) || signal.aborted) throw err;
      // Kept in the run record and shown by `baton show`: a storage error from split can quote a SAS.
      const reason = redactSecrets(err.message);
      deps.log?.('warn', `run ${input.runId} failed while planning: ${reason}`);
      const ended = await records.update(
        key,
        DURABLE_EPOCH,
        (current) => (current && current.state === 'planning' ? transition(current, 'failed', nowOf(deps), reason) : undefined),
        { abortSignal: signal },
      );
      // Keeps the plan another attempt may have recorded meanwhile.
      await deleteOtherPlans(deps.docs, input.runId, ended?.value.planEpoch ?? null, { abortSignal: signal });
      const state = ended?.value.state;
      return state === 'failed' ? { kind: 'failed', reason } : splitResultOf(ended?.value);
    }

    const recorded = await records.update(
      key,
      DURABLE_EPOCH,
      (current) => {
        if (!current || current.state !== 'planning') return undefined; // another attempt won, or the run ended
        const now = nowOf(deps);
        const messages = Math.ceil(plan.planned / job.itemsPerMessage);
        return {
          ...transition(transition(current, 'dispatching', now), 'running', now),
          planEpoch,
          planChunks: plan.chunks,
          chunkItems,
          // The orchestration schedules the whole plan at once: every message counts as sent.
          messages,
          cursor: messages,
          counters: { ...current.counters, planned: plan.planned, dispatched: plan.planned },
          acc: job.aggregate.initial(),
          // The durable engine keeps item outcomes in its orchestrations, not in a bitset here.
          seen: null,
        } satisfies RunRecord;
      },
      { abortSignal: signal },
    );
    if (recorded?.value.planEpoch !== planEpoch) {
      await deleteOtherPlans(deps.docs, input.runId, recorded?.value.planEpoch ?? null, { abortSignal: signal });
    }
    deps.log?.('info', `run ${input.runId} planned ${plan.planned} items in ${plan.chunks} chunks`);
    return splitResultOf(recorded?.value);
  };
}

function splitResultOf(record: RunRecord | undefined): SplitResult {
  if (!record) throw new Error('the run record disappeared while planning');
  if (isTerminal(record.state)) return { kind: 'ended', result: runResultOf(record) };
  if (record.state === 'planning') throw new Error(`run ${record.runId} is still planning`);
  return planOf(record);
}

function planOf(record: RunRecord): SplitResult {
  if (record.planEpoch === null) throw new Error(`run ${record.runId} is ${record.state} without a plan`);
  return {
    kind: 'planned',
    planned: record.counters.planned,
    planEpoch: record.planEpoch,
    chunkItems: record.chunkItems,
    chunks: record.planChunks,
  };
}
