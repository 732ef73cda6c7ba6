import * as df from 'durable-functions';
import { assert, describe, expect, it } from 'vitest';
import { jobStateKey, jobStateSchema, newJobState, type JobState } from '../../../src/hub/job-state';
import { readRunDetails } from '../../../src/hub/status';
import type { DocumentStore, WriteCondition, DocumentCallOptions } from '../../../src/fencing/document-store';
import { FencedDocuments } from '../../../src/fencing/fenced-documents';
import { InMemoryDocumentStore } from '../../../src/fencing/in-memory-document-store';
import type { JobDefinition } from '../../../src/jobs/job-definition';
import {
  newRunRecord,
  runKeys,
  runRecordSchema,
  scheduledRunId,
  transition,
  type RunRecord,
  type RunState,
} from '../../../src/hub/run-record';
import {
  chunkInstanceId,
  createSplitActivity,
  DURABLE_NAMES,
  runInstanceId,
  startDueRuns,
  type DurableClientPort,
} from '../../../src/durable';
import { FakeDurableExtension, useFakeDurable } from '../../support/durable-extension';
import { withMerge } from '../../support/durable-jobs';
import { ForwardingDocumentStore } from '../../support/forwarding-document-store';
import { sumJob, type SumAcc } from '../../support/sample-jobs';

const Status = df.OrchestrationRuntimeStatus;
const mergeSum = (a: SumAcc, b: SumAcc): SumAcc => ({
  count: a.count + b.count,
  sum: a.sum + b.sum,
  squares: a.squares + b.squares,
});
function job(
  name = 'nightly',
  options: { overlap?: 'skip' | 'allow' | 'replace'; timeoutSeconds?: number; finalize?: JobDefinition['finalize'] } = {},
): JobDefinition {
  const defined = withMerge(
    sumJob({
      name,
      items: 1,
      schedule: '0 * * * * *',
      overlap: options.overlap ?? 'skip',
      timeoutSeconds: options.timeoutSeconds ?? 600,
    }),
    mergeSum,
  );
  return options.finalize ? { ...defined, finalize: options.finalize } : defined;
}

const T0 = new Date('2026-03-01T02:00:30.000Z'); // first check: records where the schedule starts
const T1 = new Date('2026-03-01T02:01:10.000Z'); // the 02:01:00 occurrence is due
const DUE = new Date('2026-03-01T02:01:00.000Z');
const DUE_RUN = scheduledRunId('nightly', DUE);
const DUE_INSTANCE = runInstanceId(DUE_RUN);
const at = (base: Date, seconds: number) => new Date(base.getTime() + seconds * 1000);

const fakeDurable = useFakeDurable();

function hub(docs: DocumentStore = new InMemoryDocumentStore()) {
  const records = new FencedDocuments<RunRecord>(docs, { parse: (v) => runRecordSchema.parse(v) });
  const states = new FencedDocuments<JobState>(docs, { parse: (v) => jobStateSchema.parse(v) });
  return {
    docs,
    records,
    state: async (name = 'nightly') => (await states.read(jobStateKey(name)))?.value,
    record: async (runId: string) => (await records.read(runKeys.record(runId)))?.value,
    /** The record as the split activity leaves it: `state`, with `planned` items, at the durable engine's epoch. */
    async seed(runId: string, state: RunState, options: { planned?: number; created?: Date; timeoutSeconds?: number } = {}) {
      const created = options.created ?? T1;
      let record = newRunRecord({
        runId,
        job: runId.slice(0, runId.indexOf('/')),
        trigger: 'schedule',
        occurrence: new Date(runId.slice(runId.indexOf('/') + 1)),
        now: created,
        timeoutSeconds: options.timeoutSeconds ?? 600,
      });
      const path: RunState[] = ['dispatching', 'running', 'finalizing'];
      for (const next of path.slice(0, path.indexOf(state) + 1)) record = transition(record, next, created);
      const planned = options.planned ?? 10;
      record = { ...record, planEpoch: 7, planChunks: 1, counters: { ...record.counters, planned, dispatched: planned } };
      await records.create(runKeys.record(runId), 0, record);
    },
  };
}

/** The port, with a look at the run record each time something is terminated. */
function watchingTerminate(
  port: DurableClientPort,
  read: () => Promise<RunRecord | undefined>,
  seen: string[],
): DurableClientPort {
  return {
    ...port,
    async terminate(instanceId, reason) {
      seen.push(`${instanceId}: record ${(await read())?.state ?? 'missing'}`);
      await port.terminate(instanceId, reason);
    },
  };
}

/** Starts the 02:01 occurrence as the leader would, and plans it as the split activity would. */
async function startedRun(durable: FakeDurableExtension, h: ReturnType<typeof hub>, jobs: JobDefinition[]) {
  await startDueRuns({ jobs, client: durable.port(), docs: h.docs, epoch: 3, now: T0 });
  expect((await startDueRuns({ jobs, client: durable.port(), docs: h.docs, epoch: 3, now: T1 })).started).toEqual([DUE_RUN]);
  durable.set(DUE_INSTANCE, Status.Running);
  await h.seed(DUE_RUN, 'running', { timeoutSeconds: jobs[0]!.timeoutSeconds });
}

describe('durable runs past their deadline', () => {
  it('end timed-out in the record first, keep what the orchestration counted, then stop the orchestration and its chunks', async () => {
    const h = hub();
    const durable = await fakeDurable();
    const jobs = [job('nightly', { timeoutSeconds: 60 })];
    await startedRun(durable, h, jobs);
    durable.set(DUE_INSTANCE, Status.Running, { customStatus: { done: 4, failed: 1, total: 10 } });
    durable.add(chunkInstanceId(DUE_INSTANCE, 0), DURABLE_NAMES.chunk, Status.Running, { runId: DUE_RUN, chunk: 0 });
    durable.add(chunkInstanceId(DUE_INSTANCE, 1), DURABLE_NAMES.chunk, Status.Completed, { runId: DUE_RUN, chunk: 1 });
    const seen: string[] = [];
    const client = watchingTerminate(durable.port(), () => h.record(DUE_RUN), seen);

    // Before the deadline nothing changes.
    await startDueRuns({ jobs, client, docs: h.docs, epoch: 3, now: at(T1, 59) });
    expect(seen).toEqual([]);
    expect(await h.record(DUE_RUN)).toMatchObject({ state: 'running' });

    const deadlineAt = at(T1, 60).toISOString();
    const reason = `still running at its deadline ${deadlineAt}`;
    const late = await startDueRuns({ jobs, client, docs: h.docs, epoch: 3, now: at(T1, 61) });
    const details = await readRunDetails(h.docs, DUE_RUN);
    expect(details?.record.state).toBe('timed-out');
    expect(seen).toEqual([`${DUE_INSTANCE}: record timed-out`, `${chunkInstanceId(DUE_INSTANCE, 0)}: record timed-out`]);
    expect(durable.terminated.map((t) => t.reason)).toEqual([reason, reason]);
    expect(late.ended).toEqual([{ runId: DUE_RUN, state: 'timed-out', reason }]);
    expect(late.errors).toEqual([]);
    expect(details?.record).toMatchObject({
      state: 'timed-out',
      endReason: reason,
      endedAt: at(T1, 61).toISOString(),
      counters: { planned: 10, succeeded: 3, failed: 1 },
      manifestKey: runKeys.manifest(DUE_RUN),
    });
    expect(details?.manifest).toEqual({
      runId: DUE_RUN,
      state: 'timed-out',
      failedCount: 0,
      failureParts: [],
      missing: [],
      missingCount: 6,
    });
    expect((await h.state())?.active).toEqual([]);

    // Ended: the next tick leaves it alone.
    const after = await startDueRuns({ jobs, client, docs: h.docs, epoch: 3, now: at(T1, 62) });
    expect(after.ended).toEqual([]);
    expect(seen).toHaveLength(2);
  });

  it('leave a run that is finalizing at its deadline to finish, as the queue engine does', async () => {
    const h = hub();
    const durable = await fakeDurable();
    const jobs = [job('nightly', { timeoutSeconds: 60 })];
    await startDueRuns({ jobs, client: durable.port(), docs: h.docs, epoch: 3, now: T0 });
    await startDueRuns({ jobs, client: durable.port(), docs: h.docs, epoch: 3, now: T1 });
    durable.set(DUE_INSTANCE, Status.Running);
    await h.seed(DUE_RUN, 'finalizing');
    await startDueRuns({ jobs, client: durable.port(), docs: h.docs, epoch: 3, now: at(T1, 3600) });
    expect(durable.terminated).toEqual([]);
    expect(await h.record(DUE_RUN)).toMatchObject({ state: 'finalizing' });
    expect((await h.state())?.active).toEqual([DUE_RUN]);
  });

  it('end an orchestration that never planned past the job timeout with a timed-out record, which its late split then finds', async () => {
    const h = hub();
    const durable = await fakeDurable({ now: () => T1 });
    const nightly = job('nightly', { timeoutSeconds: 60 });
    await startDueRuns({ jobs: [nightly], client: durable.port(), docs: h.docs, epoch: 3, now: T0 });
    await startDueRuns({ jobs: [nightly], client: durable.port(), docs: h.docs, epoch: 3, now: T1 });
    expect(durable.instances.get(DUE_INSTANCE)?.runtimeStatus).toBe(Status.Pending);

    const summary = await startDueRuns({ jobs: [nightly], client: durable.port(), docs: h.docs, epoch: 3, now: at(T1, 61) });
    const reason = `its orchestration was still Pending at its deadline ${at(T1, 60).toISOString()}, before the run was planned`;
    expect(await h.record(DUE_RUN)).toMatchObject({
      state: 'timed-out',
      endReason: reason,
      trigger: 'schedule',
      occurrence: DUE.toISOString(),
    });
    expect(summary.ended).toEqual([{ runId: DUE_RUN, state: 'timed-out', reason }]);
    expect(durable.terminated).toEqual([{ instanceId: DUE_INSTANCE, reason }]);

    const split = createSplitActivity({ jobs: new Map([[nightly.name, nightly]]), docs: h.docs });
    await expect(
      split({ runId: DUE_RUN, job: 'nightly', occurrence: DUE.toISOString(), trigger: 'schedule', chunkItems: 500 }),
    ).resolves.toMatchObject({ kind: 'ended', result: { state: 'timed-out' } });
  });
});

describe('durable runs whose orchestration ended without ending them', () => {
  const cases = [
    {
      status: Status.Failed,
      output: "Orchestrator function 'baton-run' failed: job nightly is not registered on this instance\n   at requireJob",
      state: 'failed',
      reason:
        "its orchestration failed while the run was running: Orchestrator function 'baton-run' failed: job nightly is not registered on this instance",
    },
    {
      status: Status.Terminated,
      output: 'stopped by an operator',
      state: 'cancelled',
      reason: 'its orchestration was terminated while the run was running: stopped by an operator',
    },
    {
      status: Status.Canceled,
      output: null,
      state: 'cancelled',
      reason: 'its orchestration was canceled while the run was running',
    },
    {
      status: Status.Completed,
      output: { state: 'running' },
      state: 'failed',
      reason: 'its orchestration completed without ending the run while the run was running',
    },
    {
      status: undefined,
      output: null,
      state: 'failed',
      reason: `its orchestration ${DUE_INSTANCE} no longer exists while the run was running`,
    },
  ] as const;

  it.each(cases)('end the record when the orchestration is $status, with the reason and what it counted', async (c) => {
    const h = hub();
    const durable = await fakeDurable();
    const jobs = [job()];
    await startedRun(durable, h, jobs);
    if (c.status) durable.set(DUE_INSTANCE, c.status, { output: c.output, customStatus: { done: 2, failed: 0, total: 10 } });
    else durable.instances.delete(DUE_INSTANCE);

    const summary = await startDueRuns({ jobs, client: durable.port(), docs: h.docs, epoch: 3, now: at(T1, 5) });
    const details = await readRunDetails(h.docs, DUE_RUN);
    expect(details?.record.state).toBe(c.state);
    expect(summary.ended).toEqual([{ runId: DUE_RUN, state: c.state, reason: c.reason }]);
    expect(summary.errors).toEqual([]);
    expect(details?.record).toMatchObject({
      state: c.state,
      endReason: c.reason,
      counters: { planned: 10, succeeded: c.status ? 2 : 0, failed: 0 },
      manifestKey: runKeys.manifest(DUE_RUN),
    });
    expect(details?.manifest).toMatchObject({ state: c.state, missingCount: c.status ? 8 : 10 });
    expect(durable.terminated).toEqual([]);
    expect((await h.state())?.active).toEqual([]);
  });

  it('stop chunks a failed orchestration left running', async () => {
    const h = hub();
    const durable = await fakeDurable();
    const jobs = [job()];
    await startedRun(durable, h, jobs);
    durable.add(chunkInstanceId(DUE_INSTANCE, 3), DURABLE_NAMES.chunk, Status.Running, { runId: DUE_RUN, chunk: 3 });
    durable.set(DUE_INSTANCE, Status.Failed, { output: 'boom' });
    await startDueRuns({ jobs, client: durable.port(), docs: h.docs, epoch: 3, now: at(T1, 5) });
    const reason = 'its orchestration failed while the run was running: boom';
    expect(await h.record(DUE_RUN)).toMatchObject({ state: 'failed', endReason: reason });
    expect(durable.terminated).toEqual([{ instanceId: chunkInstanceId(DUE_INSTANCE, 3), reason }]);
  });

  it('a finalizing run whose output was written ends as the output says, and its finalize hook is called', async () => {
    const h = hub();
    const durable = await fakeDurable();
    const hooks: Array<{ output: unknown; runId: string; idempotencyKey: string; state: string }> = [];
    const jobs = [
      job('nightly', {
        finalize: (output, ctx) => {
          hooks.push({ output, runId: ctx.runId, idempotencyKey: ctx.idempotencyKey, state: ctx.state });
        },
      }),
    ];
    await startedRun(durable, h, jobs);
    const finalizing = transition((await h.record(DUE_RUN))!, 'finalizing', T1);
    const stored = await h.records.read(runKeys.record(DUE_RUN));
    await h.records.replace(runKeys.record(DUE_RUN), 0, stored!, finalizing);
    const counters = { planned: 10, dispatched: 10, succeeded: 9, failed: 1, duplicates: 0, rejected: 0 };
    const output = {
      runId: DUE_RUN,
      job: 'nightly',
      occurrence: DUE.toISOString(),
      state: 'succeeded',
      counters,
      output: { sum: 3 },
    };
    await h.docs.write(runKeys.output(DUE_RUN), JSON.stringify(output), { ifNoneMatch: '*' });
    const manifest = {
      runId: DUE_RUN,
      state: 'succeeded',
      failed: [{ item: 4, reason: 'x', attempts: 5 }],
      missing: [],
      missingCount: 0,
    };
    await h.docs.write(runKeys.manifest(DUE_RUN), JSON.stringify(manifest), { ifNoneMatch: '*' });
    durable.set(DUE_INSTANCE, Status.Failed, { output: 'storage kept failing' });

    const summary = await startDueRuns({ jobs, client: durable.port(), docs: h.docs, epoch: 3, now: at(T1, 5) });
    const reason = 'its orchestration failed while finalizing, after writing the output: storage kept failing';
    expect(summary.ended).toEqual([{ runId: DUE_RUN, state: 'succeeded', reason }]);
    const details = await readRunDetails(h.docs, DUE_RUN);
    expect(details?.record).toMatchObject({
      state: 'succeeded',
      endReason: reason,
      counters,
      outputKey: runKeys.output(DUE_RUN),
      manifestKey: runKeys.manifest(DUE_RUN),
      finalizeError: null,
    });
    // Written inline, as before the failure log: it reads back with its count.
    expect(details?.manifest).toEqual({ ...manifest, failedCount: 1 });
    expect(hooks).toEqual([{ output: { sum: 3 }, runId: DUE_RUN, idempotencyKey: DUE_RUN, state: 'succeeded' }]);
  });

  it('a finalizing run without an output ends failed, saying so', async () => {
    const h = hub();
    const durable = await fakeDurable();
    const jobs = [job()];
    await startedRun(durable, h, jobs);
    const stored = await h.records.read(runKeys.record(DUE_RUN));
    await h.records.replace(runKeys.record(DUE_RUN), 0, stored!, transition(stored!.value, 'finalizing', T1));
    durable.set(DUE_INSTANCE, Status.Failed, { output: 'storage kept failing' });
    await startDueRuns({ jobs, client: durable.port(), docs: h.docs, epoch: 3, now: at(T1, 5) });
    expect(await h.record(DUE_RUN)).toMatchObject({
      state: 'failed',
      endReason: 'its orchestration failed while finalizing, before writing the output: storage kept failing',
      outputKey: null,
    });
  });

  it('an orchestration that failed before planning gets a failed record saying why', async () => {
    const h = hub();
    const durable = await fakeDurable();
    const jobs = [job()];
    await startDueRuns({ jobs, client: durable.port(), docs: h.docs, epoch: 3, now: T0 });
    await startDueRuns({ jobs, client: durable.port(), docs: h.docs, epoch: 3, now: T1 });
    durable.set(DUE_INSTANCE, Status.Failed, { output: 'ZodError: runId is required' });
    const summary = await startDueRuns({ jobs, client: durable.port(), docs: h.docs, epoch: 3, now: at(T1, 5) });
    const reason = 'its orchestration failed before the run was planned: ZodError: runId is required';
    expect(await h.record(DUE_RUN)).toMatchObject({
      state: 'failed',
      endReason: reason,
      job: 'nightly',
      occurrence: DUE.toISOString(),
    });
    expect(summary.ended).toEqual([{ runId: DUE_RUN, state: 'failed', reason }]);
    expect((await h.state())?.active).toEqual([]);
  });

  it('a run started just before the leader died, whose orchestration failed before the next tick, still ends', async () => {
    const docs = new InMemoryDocumentStore();
    /** Dies at the job state write that would have recorded the start (the one after it). */
    class DiesAfterStart extends ForwardingDocumentStore {
      armed = false;
      override write(key: string, body: string, condition: WriteCondition, options?: DocumentCallOptions) {
        if (this.armed && key === jobStateKey('nightly') && durable.starts.length > 0) {
          return Promise.reject(new Error('the leader died here'));
        }
        return super.write(key, body, condition, options);
      }
    }
    const dying = new DiesAfterStart(docs);
    const h = hub(docs);
    const durable = await fakeDurable();
    const jobs = [job()];
    await startDueRuns({ jobs, client: durable.port(), docs, epoch: 3, now: T0 });
    dying.armed = true;
    await startDueRuns({ jobs, client: durable.port(), docs: dying, epoch: 3, now: T1 }).catch(() => undefined);
    expect(durable.starts.map((s) => s.instanceId)).toEqual([DUE_INSTANCE]);
    await h.seed(DUE_RUN, 'running');
    durable.set(DUE_INSTANCE, Status.Failed, { output: 'boom' });

    await startDueRuns({ jobs, client: durable.port(), docs, epoch: 4, now: at(T1, 5) });
    expect(await h.record(DUE_RUN)).toMatchObject({
      state: 'failed',
      endReason: 'its orchestration failed while the run was running: boom',
    });
    expect(durable.starts).toHaveLength(1);
  });
});

describe('durable runs of a job a deploy removed', () => {
  async function removedJobRun(status: df.OrchestrationRuntimeStatus, output?: unknown) {
    const h = hub();
    const durable = await fakeDurable();
    const gone = scheduledRunId('gone', DUE);
    const states = new FencedDocuments<JobState>(h.docs, { parse: (v) => jobStateSchema.parse(v) });
    await states.create(jobStateKey('gone'), 2, { ...newJobState('gone'), lastChecked: T0.toISOString(), active: [gone] });
    await h.seed(gone, 'running', { timeoutSeconds: 60 });
    durable.add(runInstanceId(gone), DURABLE_NAMES.orchestrator, status, { runId: gone }, { output });
    durable.add(chunkInstanceId(runInstanceId(gone), 0), DURABLE_NAMES.chunk, Status.Running, { runId: gone, chunk: 0 });
    return { h, durable, gone, jobs: [job()] };
  }

  it('run on while their orchestration runs, then end timed-out at their deadline, orchestration stopped', async () => {
    const { h, durable, gone, jobs } = await removedJobRun(Status.Running);
    await startDueRuns({ jobs, client: durable.port(), docs: h.docs, epoch: 3, now: at(T1, 30) });
    expect(await h.record(gone)).toMatchObject({ state: 'running' });
    expect(durable.terminated).toEqual([]);
    expect((await h.state('gone'))?.active).toEqual([gone]);

    const late = await startDueRuns({ jobs, client: durable.port(), docs: h.docs, epoch: 3, now: at(T1, 61) });
    const reason = `still running at its deadline ${at(T1, 60).toISOString()}; job gone is no longer defined`;
    expect(await h.record(gone)).toMatchObject({ state: 'timed-out', endReason: reason });
    expect(late.ended).toEqual([{ runId: gone, state: 'timed-out', reason }]);
    expect(durable.terminated.map((t) => t.instanceId)).toEqual([runInstanceId(gone), chunkInstanceId(runInstanceId(gone), 0)]);
    expect((await h.state('gone'))?.active).toEqual([]);
  });

  it('end as soon as their orchestration has ended, saying the job is gone', async () => {
    const { h, durable, gone, jobs } = await removedJobRun(Status.Failed, 'job gone is not registered on this instance');
    const summary = await startDueRuns({ jobs, client: durable.port(), docs: h.docs, epoch: 3, now: at(T1, 5) });
    const reason =
      'its orchestration failed while the run was running: job gone is not registered on this instance; job gone is no longer defined';
    expect(await h.record(gone)).toMatchObject({ state: 'failed', endReason: reason });
    expect(summary.ended).toEqual([{ runId: gone, state: 'failed', reason }]);
    expect(durable.terminated.map((t) => t.instanceId)).toEqual([chunkInstanceId(runInstanceId(gone), 0)]);
    expect((await h.state('gone'))?.active).toEqual([]);
  });
});

describe('cancel (overlap replace)', () => {
  it('records the cancel before it terminates: a terminate that fails leaves a cancelled record, and the next tick stops the orchestration', async () => {
    const h = hub();
    const durable = await fakeDurable();
    const jobs = [job('nightly', { overlap: 'replace' })];
    await startDueRuns({ jobs, client: durable.port(), docs: h.docs, epoch: 3, now: T0 });
    const old = scheduledRunId('nightly', new Date('2026-03-01T01:59:00.000Z'));
    const oldInstance = runInstanceId(old);
    durable.add(oldInstance, DURABLE_NAMES.orchestrator, Status.Running, { runId: old });
    await h.seed(old, 'running', { created: T0 });
    const seen: string[] = [];
    durable.failNext('terminate', 'the extension is unavailable', oldInstance);
    const client = watchingTerminate(durable.port(), () => h.record(old), seen);

    const summary = await startDueRuns({ jobs, client, docs: h.docs, epoch: 3, now: T1 }).catch((err: Error) => err);
    expect(seen).toEqual([`${oldInstance}: record cancelled`]);
    expect(await h.record(old)).toMatchObject({ state: 'cancelled' });
    assert(!(summary instanceof Error));
    expect(summary).toMatchObject({ cancelled: [old], started: [DUE_RUN] });
    expect(summary.errors).toEqual([{ job: 'nightly', error: expect.stringContaining(`terminate ${oldInstance}: Error:`) }]);
    expect(summary.errors[0]!.error).toContain('the extension is unavailable');
    const reason = `replaced by the occurrence at ${DUE.toISOString()}`;
    expect(await readRunDetails(h.docs, old)).toMatchObject({
      record: { state: 'cancelled', endReason: reason, manifestKey: runKeys.manifest(old) },
      manifest: { state: 'cancelled', missingCount: 10 },
    });
    expect(durable.instances.get(oldInstance)?.runtimeStatus).toBe(Status.Running);

    const next = await startDueRuns({ jobs, client, docs: h.docs, epoch: 3, now: at(T1, 10) });
    expect(next.errors).toEqual([]);
    expect(durable.instances.get(oldInstance)).toMatchObject({ runtimeStatus: Status.Terminated, output: reason });
    expect(await h.record(old)).toMatchObject({ state: 'cancelled', endReason: reason });
  });

  it('a run still finalizing is left to finish: nothing is terminated', async () => {
    const h = hub();
    const durable = await fakeDurable();
    const jobs = [job('nightly', { overlap: 'replace' })];
    await startDueRuns({ jobs, client: durable.port(), docs: h.docs, epoch: 3, now: T0 });
    const old = scheduledRunId('nightly', new Date('2026-03-01T01:59:00.000Z'));
    durable.add(runInstanceId(old), DURABLE_NAMES.orchestrator, Status.Running, { runId: old });
    await h.seed(old, 'finalizing', { created: T0 });
    const summary = await startDueRuns({ jobs, client: durable.port(), docs: h.docs, epoch: 3, now: T1 });
    expect(summary).toMatchObject({ cancelled: [], started: [DUE_RUN] });
    expect(durable.terminated).toEqual([]);
    expect(await h.record(old)).toMatchObject({ state: 'finalizing' });
  });
});

describe('the starter isolates jobs', () => {
  it("one job's unreadable state does not stop another job from starting; the error names the job", async () => {
    const h = hub();
    const durable = await fakeDurable();
    const jobs = [job('broken'), job('nightly')];
    const lines: string[] = [];
    const log = (level: string, message: string) => lines.push(`${level} ${message}`);
    await startDueRuns({ jobs, client: durable.port(), docs: h.docs, epoch: 3, now: T0, log });
    await h.docs.write(jobStateKey('broken'), '{"epoch":3,"value":{"v":1,"job":"broken"', {});

    const summary = await startDueRuns({ jobs, client: durable.port(), docs: h.docs, epoch: 3, now: T1, log }).catch(
      (e: Error) => e,
    );
    expect(durable.starts.map((s) => s.instanceId)).toEqual([DUE_INSTANCE]);
    assert(!(summary instanceof Error));
    expect(summary.started).toEqual([DUE_RUN]);
    expect(summary.errors).toEqual([
      { job: 'broken', error: expect.stringContaining('jobs/broken.json is not a fenced document') },
    ]);
    expect(lines.filter((l) => l.startsWith('warn job broken: '))).toHaveLength(1);
  });

  it("one job's failed start does not stop another job; the failed one starts on the next tick", async () => {
    const h = hub();
    const durable = await fakeDurable();
    const jobs = [job('first'), job('nightly')];
    const firstRun = scheduledRunId('first', DUE);
    await startDueRuns({ jobs, client: durable.port(), docs: h.docs, epoch: 3, now: T0 });
    durable.failNext('start', 'the task hub is unavailable', runInstanceId(firstRun));
    // The port finds no instance after a refused start, so the error is the extension's own.
    const summary = await startDueRuns({ jobs, client: durable.port(), docs: h.docs, epoch: 3, now: T1 }).catch((e: Error) => e);
    expect(durable.starts.map((s) => s.instanceId)).toEqual([DUE_INSTANCE]);
    assert(!(summary instanceof Error));
    expect(summary.started).toEqual([DUE_RUN]);
    expect(summary.errors).toEqual([
      {
        job: 'first',
        error: expect.stringMatching(new RegExp(`^Error: start of run ${firstRun} failed: .*the task hub is unavailable`)),
      },
    ]);
    expect(await h.state('first')).toMatchObject({ lastChecked: T0.toISOString(), active: [], totals: { started: 0 } });

    const retry = await startDueRuns({ jobs, client: durable.port(), docs: h.docs, epoch: 3, now: at(T1, 10) });
    expect(retry.started).toEqual([firstRun]);
    expect(retry.errors).toEqual([]);
    expect(await h.state('first')).toMatchObject({ active: [firstRun], totals: { started: 1 } });
  });

  it("one run's unreadable record does not stop its own job's starts", async () => {
    const h = hub();
    const durable = await fakeDurable();
    const jobs = [job('nightly', { overlap: 'allow' })];
    await startDueRuns({ jobs, client: durable.port(), docs: h.docs, epoch: 3, now: T0 });
    const other = scheduledRunId('nightly', new Date('2026-03-01T01:59:00.000Z'));
    durable.add(runInstanceId(other), DURABLE_NAMES.orchestrator, Status.Running, { runId: other });
    await h.docs.write(runKeys.record(other), 'not json', {});
    const summary = await startDueRuns({ jobs, client: durable.port(), docs: h.docs, epoch: 3, now: T1 });
    expect(durable.starts.map((s) => s.instanceId)).toEqual([DUE_INSTANCE]);
    expect(summary.started).toEqual([DUE_RUN]);
    expect(summary.errors).toEqual([{ job: 'nightly', error: expect.stringContaining(`checking run ${other}: Error:`) }]);
    expect((await h.state())?.active.sort()).toEqual([other, DUE_RUN].sort());
  });
});
