import * as df from 'durable-functions';
import { describe, expect, it } from 'vitest';
import { InvalidConfigError, StaleEpochError } from '../../../src/errors';
import { jobStateKey, jobStateSchema, type JobState } from '../../../src/hub/job-state';
import { readRunDetails } from '../../../src/hub/status';
import { FencedDocuments } from '../../../src/fencing/fenced-documents';
import { InMemoryDocumentStore } from '../../../src/fencing/in-memory-document-store';
import { withEpochRaises } from '../../../src/lease/epoch-refusal';
import { InMemoryLeaseStore } from '../../../src/lease/in-memory-lease-store';
import { LeaderElector } from '../../../src/lease/leader-elector';
import { newRunRecord, runKeys, runRecordSchema, scheduledRunId, transition, type RunRecord } from '../../../src/hub/run-record';
import {
  chunkInstanceId,
  DEFAULT_DURABLE_SETTINGS,
  DURABLE_NAMES,
  durableClientPort,
  runInstanceId,
  startDueRuns,
  type DurableClientPort,
} from '../../../src/durable';
import { useFakeDurable } from '../../support/durable-extension';
import type { ItemRetryOptions } from '../../../src/jobs/retry-policy';
import { withMerge } from '../../support/durable-jobs';
import { sumJob, type SumAcc } from '../../support/sample-jobs';

const mergeSum = (a: SumAcc, b: SumAcc): SumAcc => ({
  count: a.count + b.count,
  sum: a.sum + b.sum,
  squares: a.squares + b.squares,
});
const everyMinute = (overlap: 'skip' | 'allow' | 'replace' = 'skip') =>
  withMerge(sumJob({ name: 'nightly', items: 1, schedule: '0 * * * * *', overlap }), mergeSum);

const T0 = new Date('2026-03-01T02:00:30.000Z'); // first check: records where the schedule starts
const T1 = new Date('2026-03-01T02:01:10.000Z'); // the 02:01:00 occurrence is due
const DUE = new Date('2026-03-01T02:01:00.000Z');
const DUE_RUN = scheduledRunId('nightly', DUE);
const Status = df.OrchestrationRuntimeStatus;

/**
 * Durable as the starter sees it: the real durable-functions client (and the port over it) talking
 * to a fake of the extension's HTTP API, which dedupes starts as host.json configures it.
 */
const fakeDurable = useFakeDurable();

function hub() {
  const docs = new InMemoryDocumentStore();
  const states = new FencedDocuments<JobState>(docs, { parse: (v) => jobStateSchema.parse(v) });
  return { docs, state: async () => (await states.read(jobStateKey('nightly')))?.value };
}

describe('startDueRuns', () => {
  it('starts a due occurrence as one orchestration whose instance id is the run id made safe; asking again starts nothing', async () => {
    const { docs, state } = hub();
    const durable = await fakeDurable();
    const jobs = [everyMinute()];
    expect((await startDueRuns({ jobs, client: durable.port(), docs, epoch: 3, now: T0 })).started).toEqual([]);
    const before = await docs.read(jobStateKey('nightly'));

    const first = await startDueRuns({ jobs, client: durable.port(), docs, epoch: 3, now: T1 });
    expect(first.started).toEqual([DUE_RUN]);
    expect(durable.starts).toEqual([
      {
        name: DURABLE_NAMES.orchestrator,
        instanceId: runInstanceId(DUE_RUN),
        input: {
          runId: DUE_RUN,
          job: 'nightly',
          occurrence: DUE.toISOString(),
          trigger: 'schedule',
          settings: DEFAULT_DURABLE_SETTINGS,
        },
      },
    ]);
    // Durable refuses `/ \ # ?` and more than 100 characters in instance ids.
    expect(durable.starts[0]!.instanceId).toMatch(/^[^/\\#?]{1,100}$/);
    expect(runInstanceId(scheduledRunId('nightly', new Date(DUE.getTime())))).toBe(durable.starts[0]!.instanceId);
    expect(await state()).toMatchObject({
      lastChecked: T1.toISOString(),
      active: [DUE_RUN],
      totals: { started: 1, skipped: 0, missed: 0 },
      recent: [{ outcome: 'started', runId: DUE_RUN, occurrence: DUE.toISOString() }],
    });

    // A leader whose job-state write was lost (or a second app on the hub) sees the same window again.
    await docs.write(jobStateKey('nightly'), before!.body, {});
    const again = await startDueRuns({ jobs, client: durable.port(), docs, epoch: 4, now: T1 });
    expect(again).toMatchObject({ started: [], existing: [DUE_RUN] });
    expect(durable.starts).toHaveLength(1);
  });

  it("reads the schedule on the job's zone, as the queue engine does: Berlin's skipped 02:15 and 02:45 are one run at 03:00", async () => {
    const { docs } = hub();
    const durable = await fakeDurable();
    const jobs = [
      withMerge(sumJob({ name: 'nightly', items: 1, schedule: '0 15,45 2 * * *', timeZone: 'Europe/Berlin' }), mergeSum),
    ];
    await startDueRuns({ jobs, client: durable.port(), docs, epoch: 3, now: new Date('2026-03-29T00:50:00.000Z') });
    const due = await startDueRuns({ jobs, client: durable.port(), docs, epoch: 3, now: new Date('2026-03-29T01:00:05.000Z') });
    expect(due.started).toEqual([scheduledRunId('nightly', new Date('2026-03-29T01:00:00.000Z'))]);
    const later = await startDueRuns({ jobs, client: durable.port(), docs, epoch: 3, now: new Date('2026-03-29T02:30:00.000Z') });
    expect(later.started).toEqual([]);
  });

  it.each<[string, ItemRetryOptions, Partial<typeof DEFAULT_DURABLE_SETTINGS>]>([
    ['none', {}, {}],
    ['attempts only', { attempts: 7 }, { maxAttempts: 7 }],
    [
      'every field',
      { attempts: 3, delaySeconds: 0.5, backoff: 3, maxDelaySeconds: 20 },
      { maxAttempts: 3, firstRetryIntervalMs: 500, backoffCoefficient: 3, maxRetryIntervalMs: 20_000 },
    ],
    ['no delay: the least Durable waits', { delaySeconds: 0 }, { firstRetryIntervalMs: 1 }],
  ])("the job's retry option (%s) is the run's retry settings, over the deployment's", async (_name, retry, expected) => {
    const { docs } = hub();
    const durable = await fakeDurable();
    const jobs = [withMerge(sumJob({ name: 'nightly', items: 1, schedule: '0 * * * * *', retry }), mergeSum)];
    await startDueRuns({ jobs, client: durable.port(), docs, epoch: 3, now: T0 });
    await startDueRuns({ jobs, client: durable.port(), docs, epoch: 3, now: T1 });
    expect(durable.starts.map((s) => (s.input as { settings: unknown }).settings)).toEqual([
      { ...DEFAULT_DURABLE_SETTINGS, ...expected },
    ]);
  });

  it('two starters racing on one occurrence without the lease make one orchestration, and neither fails', async () => {
    const { docs } = hub();
    const durable = await fakeDurable();
    const jobs = [everyMinute()];
    await startDueRuns({ jobs, client: durable.port(), docs, epoch: 3, now: T0 });
    durable.barrier = { size: 2, waiting: [] }; // both have looked (nothing there) before either starts
    const [a, b] = await Promise.all([
      startDueRuns({ jobs, client: durable.port(), docs, epoch: 3, now: T1 }),
      startDueRuns({ jobs, client: durable.port(), docs, epoch: 3, now: T1 }),
    ]);
    expect(durable.starts.map((s) => s.instanceId)).toEqual([runInstanceId(DUE_RUN)]);
    expect([...a.started, ...b.started]).toEqual([DUE_RUN]);
    expect([...a.existing, ...b.existing]).toEqual([DUE_RUN]);
  });

  it('never starts again an instance Durable already has, even one that has completed', async () => {
    const { docs } = hub();
    const durable = await fakeDurable();
    const jobs = [everyMinute()];
    await startDueRuns({ jobs, client: durable.port(), docs, epoch: 3, now: T0 });
    durable.add(runInstanceId(DUE_RUN), DURABLE_NAMES.orchestrator, Status.Completed, { runId: DUE_RUN });
    const summary = await startDueRuns({ jobs, client: durable.port(), docs, epoch: 3, now: T1 });
    expect(summary).toMatchObject({ started: [], existing: [DUE_RUN] });
    expect(durable.starts).toEqual([]);
  });

  it('overlap skip: an open run of the job (not its chunks) skips the occurrence and the job state says why', async () => {
    const { docs, state } = hub();
    const durable = await fakeDurable();
    const jobs = [everyMinute('skip')];
    await startDueRuns({ jobs, client: durable.port(), docs, epoch: 3, now: T0 });
    const open = scheduledRunId('nightly', new Date('2026-03-01T01:59:00.000Z'));
    durable.add(runInstanceId(open), DURABLE_NAMES.orchestrator, Status.Running, { runId: open });
    durable.add(chunkInstanceId(runInstanceId(open), 0), DURABLE_NAMES.chunk, Status.Running, { runId: open, chunk: 0 });
    const summary = await startDueRuns({ jobs, client: durable.port(), docs, epoch: 3, now: T1 });
    expect(summary.started).toEqual([]);
    expect(summary.skipped).toEqual([{ job: 'nightly', occurrence: DUE.toISOString(), reason: `run ${open} is still active` }]);
    expect(durable.starts).toEqual([]);
    expect(await state()).toMatchObject({
      active: [open],
      totals: { started: 0, skipped: 1 },
      recent: [{ outcome: 'skipped', occurrence: DUE.toISOString(), reason: `run ${open} is still active` }],
    });
  });

  it('overlap allow: starts beside the open run, and both are listed open', async () => {
    const { docs, state } = hub();
    const durable = await fakeDurable();
    const jobs = [everyMinute('allow')];
    await startDueRuns({ jobs, client: durable.port(), docs, epoch: 3, now: T0 });
    const open = scheduledRunId('nightly', new Date('2026-03-01T01:59:00.000Z'));
    durable.add(runInstanceId(open), DURABLE_NAMES.orchestrator, Status.Running, { runId: open });
    const summary = await startDueRuns({ jobs, client: durable.port(), docs, epoch: 3, now: T1 });
    expect(summary.started).toEqual([DUE_RUN]);
    expect(durable.terminated).toEqual([]);
    expect((await state())?.active.sort()).toEqual([open, DUE_RUN].sort());
  });

  it('overlap replace: terminates the old run and its chunks, ends its record cancelled, then starts', async () => {
    const { docs, state } = hub();
    const durable = await fakeDurable();
    const jobs = [everyMinute('replace')];
    await startDueRuns({ jobs, client: durable.port(), docs, epoch: 3, now: T0 });
    const open = scheduledRunId('nightly', new Date('2026-03-01T01:59:00.000Z'));
    const oldInstance = runInstanceId(open);
    durable.add(oldInstance, DURABLE_NAMES.orchestrator, Status.Running, { runId: open });
    durable.add(chunkInstanceId(oldInstance, 0), DURABLE_NAMES.chunk, Status.Running);
    durable.add(chunkInstanceId(oldInstance, 1), DURABLE_NAMES.chunk, Status.Completed);
    const records = new FencedDocuments<RunRecord>(docs, { parse: (v) => runRecordSchema.parse(v) });
    const created = newRunRecord({
      runId: open,
      job: 'nightly',
      trigger: 'schedule',
      occurrence: new Date('2026-03-01T01:59:00.000Z'),
      now: T0,
      timeoutSeconds: 3600,
    });
    const running = transition(transition(created, 'dispatching', T0), 'running', T0);
    await records.create(runKeys.record(open), 0, { ...running, counters: { ...running.counters, planned: 10 } });

    const summary = await startDueRuns({ jobs, client: durable.port(), docs, epoch: 3, now: T1 });
    const reason = `replaced by the occurrence at ${DUE.toISOString()}`;
    expect(durable.terminated).toEqual([
      { instanceId: oldInstance, reason },
      { instanceId: chunkInstanceId(oldInstance, 0), reason },
    ]);
    expect(summary).toMatchObject({ cancelled: [open], started: [DUE_RUN] });
    const details = await readRunDetails(docs, open);
    expect(details?.record).toMatchObject({ state: 'cancelled', endReason: reason, manifestKey: runKeys.manifest(open) });
    expect(details?.manifest).toEqual({
      runId: open,
      state: 'cancelled',
      failedCount: 0,
      failureParts: [],
      missing: [],
      missingCount: 10,
    });
    expect(await state()).toMatchObject({ active: [DUE_RUN] });
  });

  it('takes a start Durable refuses because the instance exists as existing, not as an error', async () => {
    const { docs } = hub();
    const jobs = [everyMinute()];
    const durable = await fakeDurable();
    const real = durable.port();
    await startDueRuns({ jobs, client: real, docs, epoch: 3, now: T0 });
    // Another starter's instance appears after this one looked: the extension refuses this start.
    durable.add(runInstanceId(DUE_RUN), DURABLE_NAMES.orchestrator, Status.Running, { runId: DUE_RUN });
    const lookedEarly: DurableClientPort = { ...real, getStatus: async () => undefined, listRunning: async () => [] };
    await expect(startDueRuns({ jobs, client: lookedEarly, docs, epoch: 3, now: T1 })).resolves.toMatchObject({
      started: [],
      existing: [DUE_RUN],
    });
    expect(durable.starts).toEqual([]);
  });

  it.each(Object.values(df.OrchestrationRuntimeStatus))(
    'overlap skip: another run of the job whose instance is %s counts as open exactly when Durable says it is',
    async (status) => {
      const { docs } = hub();
      const durable = await fakeDurable();
      const jobs = [everyMinute('skip')];
      await startDueRuns({ jobs, client: durable.port(), docs, epoch: 3, now: T0 });
      const other = scheduledRunId('nightly', new Date('2026-03-01T01:59:00.000Z'));
      durable.add(runInstanceId(other), DURABLE_NAMES.orchestrator, status, { runId: other });
      const open = [Status.Pending, Status.Running, Status.ContinuedAsNew, Status.Suspended].includes(status);
      const summary = await startDueRuns({ jobs, client: durable.port(), docs, epoch: 3, now: T1 });
      expect(summary.started).toEqual(open ? [] : [DUE_RUN]);
      expect(summary.skipped.map((s) => s.reason)).toEqual(open ? [`run ${other} is still active`] : []);
    },
  );

  it.each(Object.values(df.OrchestrationRuntimeStatus))(
    'one occurrence, one orchestration: an instance of the occurrence that is %s is never started again',
    async (status) => {
      const { docs } = hub();
      const durable = await fakeDurable();
      const jobs = [everyMinute('allow')];
      await startDueRuns({ jobs, client: durable.port(), docs, epoch: 3, now: T0 });
      durable.add(runInstanceId(DUE_RUN), DURABLE_NAMES.orchestrator, status, { runId: DUE_RUN });
      const summary = await startDueRuns({ jobs, client: durable.port(), docs, epoch: 3, now: T1 });
      expect(summary).toMatchObject({ started: [], existing: [DUE_RUN] });
      expect(durable.starts).toEqual([]);
      expect(durable.instances.get(runInstanceId(DUE_RUN))?.runtimeStatus).toBe(status);
    },
  );

  it('refuses, before starting anything, a job without aggregate.merge, naming it', async () => {
    const { docs } = hub();
    const durable = await fakeDurable();
    const bare = sumJob({ name: 'bare', items: 1, schedule: '0 * * * * *' });
    const attempt = startDueRuns({ jobs: [everyMinute(), bare], client: durable.port(), docs, epoch: 3, now: T1 });
    await expect(attempt).rejects.toThrow(InvalidConfigError);
    await expect(attempt).rejects.toMatchObject({ option: 'bare.aggregate.merge' });
    expect(durable.starts).toEqual([]);
  });
});

describe('durableClientPort over the durable-functions client', () => {
  const status = (instanceId: string, name: string = DURABLE_NAMES.orchestrator, runtimeStatus = 'Running') =>
    ({ instanceId, name, runtimeStatus, input: { runId: instanceId } }) as never;
  const notFound = new Error('DurableClient error: Durable Functions extension replied with HTTP 404 response.');
  const refused = new Error(
    'The operation failed with an unexpected status code: 500. Details: "An Orchestration instance with the status Running already exists."',
  );

  it('reads an unknown instance as undefined and passes other errors on', async () => {
    const port = durableClientPort({
      getStatus: async (id: string) => {
        if (id === 'gone') throw notFound;
        if (id === 'broken') throw new Error('socket hang up');
        return status(id);
      },
    } as never);
    await expect(port.getStatus('gone')).resolves.toBeUndefined();
    await expect(port.getStatus('broken')).rejects.toThrow('socket hang up');
    await expect(port.getStatus('here')).resolves.toMatchObject({ instanceId: 'here', runtimeStatus: 'Running' });
  });

  it('answers exists when a refused start finds the instance there, and rethrows when it does not', async () => {
    const there = new Set(['taken']);
    const port = durableClientPort({
      startNew: async (_name: string, options: { instanceId: string }) => {
        if (options.instanceId === 'fresh') return 'fresh';
        throw refused;
      },
      getStatus: async (id: string) => {
        if (!there.has(id)) throw notFound;
        return status(id);
      },
    } as never);
    await expect(port.startNew(DURABLE_NAMES.orchestrator, { instanceId: 'fresh', input: {} })).resolves.toBe('started');
    await expect(port.startNew(DURABLE_NAMES.orchestrator, { instanceId: 'taken', input: {} })).resolves.toBe('exists');
    await expect(port.startNew(DURABLE_NAMES.orchestrator, { instanceId: 'nowhere', input: {} })).rejects.toBe(refused);
  });

  it('lists open instances under a prefix, asking for their inputs', async () => {
    const filters: unknown[] = [];
    const port = durableClientPort({
      getStatusBy: async (filter: unknown) => {
        filters.push(filter);
        return [status('nightly~a'), status('nightly~a~chunk-0', DURABLE_NAMES.chunk), status('nightly-2~b'), status('other~c')];
      },
    } as never);
    const listed = await port.listRunning('nightly~');
    expect(listed.map((i) => i.instanceId)).toEqual(['nightly~a', 'nightly~a~chunk-0']);
    expect(filters).toEqual([{ runtimeStatus: ['Pending', 'Running', 'ContinuedAsNew', 'Suspended'], showInput: true }]);
  });
});

describe('durableClientPort over the real durable-functions client and the extension HTTP API', () => {
  it('reads an instance with its times as dates, and an unknown one as undefined', async () => {
    const created = new Date('2026-03-01T02:00:00.000Z');
    const durable = await fakeDurable();
    durable.add(
      'nightly~a',
      DURABLE_NAMES.orchestrator,
      Status.Failed,
      { runId: 'nightly/a' },
      { output: 'boom', createdTime: created },
    );
    const port = durable.port();
    await expect(port.getStatus('nightly~a')).resolves.toEqual({
      instanceId: 'nightly~a',
      name: DURABLE_NAMES.orchestrator,
      runtimeStatus: Status.Failed,
      input: { runId: 'nightly/a' },
      output: 'boom',
      customStatus: null,
      createdTime: created,
    });
    await expect(port.getStatus('nightly~gone')).resolves.toBeUndefined();
  });

  it('lists every open instance under the prefix across pages, and no ended one', async () => {
    const durable = await fakeDurable({ pageSize: 2 });
    for (const status of Object.values(df.OrchestrationRuntimeStatus)) {
      durable.add(`nightly~${status}`, DURABLE_NAMES.orchestrator, status, { runId: `nightly/${status}` });
      durable.add(`other~${status}`, DURABLE_NAMES.orchestrator, status);
    }
    const listed = await durable.port().listRunning('nightly~');
    expect(listed.map((i) => i.runtimeStatus).sort()).toEqual(['ContinuedAsNew', 'Pending', 'Running', 'Suspended']);
    expect(listed.every((i) => i.createdTime instanceof Date && i.input !== null)).toBe(true);
  });

  it('answers exists when the extension refuses a start for an instance still open', async () => {
    const durable = await fakeDurable();
    durable.add('nightly~a', DURABLE_NAMES.orchestrator, Status.Suspended);
    const port = durable.port();
    await expect(port.startNew(DURABLE_NAMES.orchestrator, { instanceId: 'nightly~a', input: {} })).resolves.toBe('exists');
    await expect(port.startNew(DURABLE_NAMES.orchestrator, { instanceId: 'nightly~b', input: { x: 1 } })).resolves.toBe(
      'started',
    );
    expect(durable.starts).toEqual([{ name: DURABLE_NAMES.orchestrator, instanceId: 'nightly~b', input: { x: 1 } }]);
  });

  it('terminates with the whole reason, whatever characters it holds', async () => {
    const durable = await fakeDurable();
    durable.add('nightly~a', DURABLE_NAMES.orchestrator, Status.Running);
    const reason = 'replaced by run nightly/2026-03-01T02:01:00.000Z & more: 100% #1?';
    await durable.port().terminate('nightly~a', reason);
    expect(durable.terminated).toEqual([{ instanceId: 'nightly~a', reason }]);
    expect(durable.instances.get('nightly~a')).toMatchObject({ runtimeStatus: Status.Terminated, output: reason });
  });
});

describe('the durable starter after the lease record restarted its count', () => {
  it('is refused by a newer job state before it starts anything; raised above it, it starts the due run once and records the start', async () => {
    const { docs, state } = hub();
    const durable = await fakeDurable();
    const jobs = [everyMinute()];
    await startDueRuns({ jobs, client: durable.port(), docs, epoch: 5, now: T0 });
    // The lease blob was deleted: the next leader holds epoch 1, below the job state's 5.
    const refused = await startDueRuns({ jobs, client: durable.port(), docs, epoch: 1, now: T1 }).catch((err: unknown) => err);
    expect(refused).toBeInstanceOf(StaleEpochError);
    expect(refused).toMatchObject({ writerEpoch: 1, storedEpoch: 5 });
    expect(durable.starts).toEqual([]);

    const elector = new LeaderElector({ store: new InMemoryLeaseStore(), identity: 'starter' });
    const led = await elector.runIfLeader((l) =>
      withEpochRaises(l, (epoch) => startDueRuns({ jobs, client: durable.port(), docs, epoch, now: T1 })),
    );
    expect(led).toMatchObject({ led: true, epoch: 6, value: { started: [DUE_RUN], existing: [] } });
    expect(durable.starts.map((s) => s.instanceId)).toEqual([runInstanceId(DUE_RUN)]);
    expect(await state()).toMatchObject({ totals: { started: 1 }, recent: [{ outcome: 'started', runId: DUE_RUN }] });
    expect((await new FencedDocuments(docs).read(jobStateKey('nightly')))?.epoch).toBe(6);
  });
});
