import { describe, expect, it } from 'vitest';
import { InvalidConfigError, StaleEpochError } from '../../src/errors';
import { jobStateKey, jobStateSchema, type JobState } from '../../src/engine/job-state';
import { readRunDetails } from '../../src/engine/status';
import { FencedDocuments } from '../../src/fencing/fenced-documents';
import { InMemoryDocumentStore } from '../../src/fencing/in-memory-document-store';
import { withEpochRaises } from '../../src/lease/epoch-refusal';
import { InMemoryLeaseStore } from '../../src/lease/in-memory-lease-store';
import { LeaderElector } from '../../src/lease/leader-elector';
import { newRunRecord, runKeys, runRecordSchema, scheduledRunId, transition, type RunRecord } from '../../src/runs/run-record';
import {
  chunkInstanceId,
  DEFAULT_DURABLE_SETTINGS,
  DURABLE_NAMES,
  durableClientPort,
  runInstanceId,
  startDueRuns,
  type DurableClientPort,
  type InstanceView,
} from '../../src/durable';
import { withMerge } from '../support/durable-jobs';
import { sumJob, type SumAcc } from '../support/sample-jobs';

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

/**
 * Durable's instance store as the starter sees it, with host.json `overridableExistingInstanceStates:
 * NonRunningStates`: a start on the id of an open instance is refused, one on an ended instance replaces it.
 */
class FakeDurable implements DurableClientPort {
  readonly instances = new Map<string, InstanceView>();
  readonly starts: Array<{ name: string; instanceId: string; input: unknown }> = [];
  readonly terminated: Array<{ instanceId: string; reason: string }> = [];
  /** When set, getStatus waits until this many calls are waiting: two starters both look before either starts. */
  barrier?: { size: number; waiting: Array<() => void> };

  add(instanceId: string, name: string, runtimeStatus: string, input?: unknown): void {
    this.instances.set(instanceId, { instanceId, name, runtimeStatus, input });
  }

  async getStatus(instanceId: string): Promise<InstanceView | undefined> {
    const barrier = this.barrier;
    if (barrier) {
      await new Promise<void>((resolve) => {
        barrier.waiting.push(resolve);
        if (barrier.waiting.length >= barrier.size) barrier.waiting.splice(0).forEach((go) => go());
      });
    }
    return this.instances.get(instanceId);
  }

  async startNew(name: string, options: { instanceId: string; input: unknown }): Promise<'started' | 'exists'> {
    const existing = this.instances.get(options.instanceId);
    if (existing && ['Pending', 'Running', 'Suspended'].includes(existing.runtimeStatus)) return 'exists';
    this.add(options.instanceId, name, 'Pending', options.input);
    this.starts.push({ name, ...options });
    return 'started';
  }

  async listRunning(prefix: string): Promise<InstanceView[]> {
    return [...this.instances.values()].filter(
      (i) => i.instanceId.startsWith(prefix) && ['Pending', 'Running'].includes(i.runtimeStatus),
    );
  }

  async terminate(instanceId: string, reason: string): Promise<void> {
    const instance = this.instances.get(instanceId);
    if (instance) instance.runtimeStatus = 'Terminated';
    this.terminated.push({ instanceId, reason });
  }
}

function hub() {
  const docs = new InMemoryDocumentStore();
  const states = new FencedDocuments<JobState>(docs, { parse: (v) => jobStateSchema.parse(v) });
  return { docs, state: async () => (await states.read(jobStateKey('nightly')))?.value };
}

describe('startDueRuns', () => {
  it('starts a due occurrence as one orchestration whose instance id is the run id made safe; asking again starts nothing', async () => {
    const { docs, state } = hub();
    const durable = new FakeDurable();
    const jobs = [everyMinute()];
    expect((await startDueRuns({ jobs, client: durable, docs, epoch: 3, now: T0 })).started).toEqual([]);
    const before = await docs.read(jobStateKey('nightly'));

    const first = await startDueRuns({ jobs, client: durable, docs, epoch: 3, now: T1 });
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
    const again = await startDueRuns({ jobs, client: durable, docs, epoch: 4, now: T1 });
    expect(again).toMatchObject({ started: [], existing: [DUE_RUN] });
    expect(durable.starts).toHaveLength(1);
  });

  it('two starters racing on one occurrence without the lease make one orchestration, and neither fails', async () => {
    const { docs } = hub();
    const durable = new FakeDurable();
    const jobs = [everyMinute()];
    await startDueRuns({ jobs, client: durable, docs, epoch: 3, now: T0 });
    durable.barrier = { size: 2, waiting: [] }; // both have looked (nothing there) before either starts
    const [a, b] = await Promise.all([
      startDueRuns({ jobs, client: durable, docs, epoch: 3, now: T1 }),
      startDueRuns({ jobs, client: durable, docs, epoch: 3, now: T1 }),
    ]);
    expect(durable.starts.map((s) => s.instanceId)).toEqual([runInstanceId(DUE_RUN)]);
    expect([...a.started, ...b.started]).toEqual([DUE_RUN]);
    expect([...a.existing, ...b.existing]).toEqual([DUE_RUN]);
  });

  it('never starts again an instance Durable already has, even one that has completed', async () => {
    const { docs } = hub();
    const durable = new FakeDurable();
    const jobs = [everyMinute()];
    await startDueRuns({ jobs, client: durable, docs, epoch: 3, now: T0 });
    durable.add(runInstanceId(DUE_RUN), DURABLE_NAMES.orchestrator, 'Completed', { runId: DUE_RUN });
    const summary = await startDueRuns({ jobs, client: durable, docs, epoch: 3, now: T1 });
    expect(summary).toMatchObject({ started: [], existing: [DUE_RUN] });
    expect(durable.starts).toEqual([]);
  });

  it('overlap skip: an open run of the job (not its chunks) skips the occurrence and the job state says why', async () => {
    const { docs, state } = hub();
    const durable = new FakeDurable();
    const jobs = [everyMinute('skip')];
    await startDueRuns({ jobs, client: durable, docs, epoch: 3, now: T0 });
    const open = scheduledRunId('nightly', new Date('2026-03-01T01:59:00.000Z'));
    durable.add(runInstanceId(open), DURABLE_NAMES.orchestrator, 'Running', { runId: open });
    durable.add(chunkInstanceId(runInstanceId(open), 0), DURABLE_NAMES.chunk, 'Running', { runId: open, chunk: 0 });
    const summary = await startDueRuns({ jobs, client: durable, docs, epoch: 3, now: T1 });
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
    const durable = new FakeDurable();
    const jobs = [everyMinute('allow')];
    await startDueRuns({ jobs, client: durable, docs, epoch: 3, now: T0 });
    const open = scheduledRunId('nightly', new Date('2026-03-01T01:59:00.000Z'));
    durable.add(runInstanceId(open), DURABLE_NAMES.orchestrator, 'Running', { runId: open });
    const summary = await startDueRuns({ jobs, client: durable, docs, epoch: 3, now: T1 });
    expect(summary.started).toEqual([DUE_RUN]);
    expect(durable.terminated).toEqual([]);
    expect((await state())?.active.sort()).toEqual([open, DUE_RUN].sort());
  });

  it('overlap replace: terminates the old run and its chunks, ends its record cancelled, then starts', async () => {
    const { docs, state } = hub();
    const durable = new FakeDurable();
    const jobs = [everyMinute('replace')];
    await startDueRuns({ jobs, client: durable, docs, epoch: 3, now: T0 });
    const open = scheduledRunId('nightly', new Date('2026-03-01T01:59:00.000Z'));
    const oldInstance = runInstanceId(open);
    durable.add(oldInstance, DURABLE_NAMES.orchestrator, 'Running', { runId: open });
    durable.add(chunkInstanceId(oldInstance, 0), DURABLE_NAMES.chunk, 'Running');
    durable.add(chunkInstanceId(oldInstance, 1), DURABLE_NAMES.chunk, 'Completed');
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

    const summary = await startDueRuns({ jobs, client: durable, docs, epoch: 3, now: T1 });
    const reason = `replaced by the occurrence at ${DUE.toISOString()}`;
    expect(durable.terminated).toEqual([
      { instanceId: oldInstance, reason },
      { instanceId: chunkInstanceId(oldInstance, 0), reason },
    ]);
    expect(summary).toMatchObject({ cancelled: [open], started: [DUE_RUN] });
    const details = await readRunDetails(docs, open);
    expect(details?.record).toMatchObject({ state: 'cancelled', endReason: reason, manifestKey: runKeys.manifest(open) });
    expect(details?.manifest).toEqual({ runId: open, state: 'cancelled', failed: [], missing: [], missingCount: 10 });
    expect(await state()).toMatchObject({ active: [DUE_RUN] });
  });

  it('takes a start Durable refuses because the instance exists as existing, not as an error', async () => {
    const { docs } = hub();
    const jobs = [everyMinute()];
    const refusing: DurableClientPort = {
      ...new FakeDurable(),
      getStatus: async () => undefined,
      listRunning: async () => [],
      terminate: async () => undefined,
      startNew: async () => 'exists',
    };
    await startDueRuns({ jobs, client: refusing, docs, epoch: 3, now: T0 });
    await expect(startDueRuns({ jobs, client: refusing, docs, epoch: 3, now: T1 })).resolves.toMatchObject({
      started: [],
      existing: [DUE_RUN],
    });
  });

  it('refuses, before starting anything, a job without aggregate.merge, naming it', async () => {
    const { docs } = hub();
    const durable = new FakeDurable();
    const bare = sumJob({ name: 'bare', items: 1, schedule: '0 * * * * *' });
    const attempt = startDueRuns({ jobs: [everyMinute(), bare], client: durable, docs, epoch: 3, now: T1 });
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

describe('the durable starter after the lease record restarted its count', () => {
  it('is refused by a newer job state before it starts anything; raised above it, it starts the due run once and records the start', async () => {
    const { docs, state } = hub();
    const durable = new FakeDurable();
    const jobs = [everyMinute()];
    await startDueRuns({ jobs, client: durable, docs, epoch: 5, now: T0 });
    // The lease blob was deleted: the next leader holds epoch 1, below the job state's 5.
    const refused = await startDueRuns({ jobs, client: durable, docs, epoch: 1, now: T1 }).catch((err: unknown) => err);
    expect(refused).toBeInstanceOf(StaleEpochError);
    expect(refused).toMatchObject({ writerEpoch: 1, storedEpoch: 5 });
    expect(durable.starts).toEqual([]);

    const elector = new LeaderElector({ store: new InMemoryLeaseStore(), identity: 'starter' });
    const led = await elector.runIfLeader((l) =>
      withEpochRaises(l, (epoch) => startDueRuns({ jobs, client: durable, docs, epoch, now: T1 })),
    );
    expect(led).toMatchObject({ led: true, epoch: 6, value: { started: [DUE_RUN], existing: [] } });
    expect(durable.starts.map((s) => s.instanceId)).toEqual([runInstanceId(DUE_RUN)]);
    expect(await state()).toMatchObject({ totals: { started: 1 }, recent: [{ outcome: 'started', runId: DUE_RUN }] });
    expect((await new FencedDocuments(docs).read(jobStateKey('nightly')))?.epoch).toBe(6);
  });
});
