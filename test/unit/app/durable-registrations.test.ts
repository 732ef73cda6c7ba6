import { describe, expect, it } from 'vitest';
import { batonRegistrations } from '../../../src/app/registrations';
import { createBatonRuntime } from '../../../src/app/runtime';
import { InvalidConfigError, InvalidSettingError } from '../../../src/errors';
import { defineJob } from '../../../src/jobs/define-job';
import { LocalHost } from '../../../src/local/local-host';
import { createSyntheticJob } from '../../../functions/synthetic-job';
import { createJobs } from '../../../functions/jobs';

const STORAGE = { AzureWebJobsStorage: 'UseDevelopmentStorage=true' };
const sum = createSyntheticJob({ name: 'sum', items: 10 });

function listOf(env: Record<string, string>, jobs = [sum]) {
  return batonRegistrations(createBatonRuntime({ ...STORAGE, ...env }, { jobs })).map((r) => ({
    kind: r.kind,
    name: r.name,
    ...(r.kind === 'timer' && r.durableClient ? { durableClient: true } : {}),
  }));
}

// Both engines serve the same HTTP API and status page, after their own functions.
const API = [
  ...['status', 'runs', 'run', 'failures', 'trigger', 'cancel'].map((route) => ({ kind: 'http', name: `baton-api-${route}` })),
  { kind: 'http', name: 'baton-page' },
];

describe('the registrations of each engine', () => {
  it('with BATON_ENGINE=durable: the starter timer with a durable client, both orchestrators and the three activities, no queue trigger', () => {
    expect(listOf({ BATON_ENGINE: 'durable' })).toEqual([
      { kind: 'timer', name: 'baton-coordinator', durableClient: true },
      { kind: 'orchestration', name: 'baton-run' },
      { kind: 'orchestration', name: 'baton-chunk' },
      { kind: 'activity', name: 'baton-split' },
      { kind: 'activity', name: 'baton-process' },
      { kind: 'activity', name: 'baton-finalize' },
      ...API,
    ]);
  });

  it('by default (queue): the coordinator timer and the worker queue trigger, nothing durable', () => {
    expect(listOf({})).toEqual([{ kind: 'timer', name: 'baton-coordinator' }, { kind: 'queue', name: 'baton-worker' }, ...API]);
  });

  it('with BATON_QUEUE_SHARDS=3 (queue): a worker queue trigger per shard, each on its shard’s work queue', () => {
    const runtime = createBatonRuntime({ ...STORAGE, BATON_HUB: 'nightly', BATON_QUEUE_SHARDS: '3' });
    const registrations = batonRegistrations(runtime);
    expect(registrations.map((r) => [r.kind, r.name, r.kind === 'queue' ? r.queueName : undefined])).toEqual([
      ['timer', 'baton-coordinator', undefined],
      ['queue', 'baton-worker', 'nightly-work'],
      ['queue', 'baton-worker-s1', 'nightly-work-s1'],
      ['queue', 'baton-worker-s2', 'nightly-work-s2'],
      ...API.map((r) => [r.kind, r.name, undefined]),
    ]);
    // Each trigger's results and notes go back on its own shard.
    expect(runtime.workers.map((w) => [w.results.name, w.poison.name])).toEqual([
      ['nightly-results', 'nightly-work-poison'],
      ['nightly-results-s1', 'nightly-work-s1-poison'],
      ['nightly-results-s2', 'nightly-work-s2-poison'],
    ]);
  });

  it("registers the app's own jobs on durable too: each has a merge", () => {
    const env = { ...STORAGE, BATON_ENGINE: 'durable', BATON_SYNTHETIC_JOBS: '[{"name":"sum","items":5}]' };
    expect(() => createBatonRuntime(env, { jobs: createJobs(env) })).not.toThrow();
  });

  it('refuses, at start-up and naming the job, a job without aggregate.merge on durable', () => {
    const noMerge = defineJob<number, number, number>({
      name: 'tally',
      schedule: '0 0 * * * *',
      split: () => [1, 2],
      process: (n) => n,
      aggregate: { initial: () => 0, add: (a, r) => a + r },
    });
    expect(() => createBatonRuntime({ ...STORAGE, BATON_ENGINE: 'durable' }, { jobs: [noMerge] })).toThrow(InvalidConfigError);
    expect(() => createBatonRuntime({ ...STORAGE, BATON_ENGINE: 'durable' }, { jobs: [noMerge] })).toThrow(
      /^job tally: aggregate\.merge is required by the durable engine/,
    );
    // The queue engine does not need it.
    expect(() => createBatonRuntime(STORAGE, { jobs: [noMerge] })).not.toThrow();
  });

  it.each([false, { maxPercent: 20, minWaitSeconds: 2 }] as const)(
    'takes a job with hedge %j on durable too, where it has no effect',
    (hedge) => {
      const hedged = defineJob<number, number, number>({
        name: 'tally',
        schedule: '0 0 * * * *',
        hedge,
        split: () => [1, 2],
        process: (n) => n,
        aggregate: { initial: () => 0, add: (a, r) => a + r, merge: (a, b) => a + b },
      });
      expect(() => createBatonRuntime({ ...STORAGE, BATON_ENGINE: 'durable' }, { jobs: [hedged] })).not.toThrow();
    },
  );

  it('keeps a job’s merge through defineJob, and refuses one that is not a function', () => {
    expect(sum.aggregate.merge?.({ count: 1, sum: 2, squares: 4 }, { count: 2, sum: 4, squares: 8 })).toEqual({
      count: 3,
      sum: 6,
      squares: 12,
    });
    expect(() =>
      defineJob({
        name: 'bad',
        schedule: '0 0 * * * *',
        split: () => [],
        process: () => 1,
        aggregate: { initial: () => 0, add: (a: number) => a, merge: 'add' as never },
      }),
    ).toThrow(/^job bad: aggregate\.merge/);
  });

  it('the local host refuses durable registrations with one line naming BATON_ENGINE', () => {
    const registrations = batonRegistrations(createBatonRuntime({ ...STORAGE, BATON_ENGINE: 'durable' }, { jobs: [sum] }));
    const create = () =>
      new LocalHost({ registrations, queues: () => undefined as never, hostConfig: {} as never, log: () => undefined });
    expect(create).toThrow(InvalidSettingError);
    expect(create).toThrow(/^BATON_ENGINE=durable needs the Functions host with the Durable extension/);
  });
});
