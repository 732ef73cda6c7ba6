import * as df from 'durable-functions';
import { describe, expect, it } from 'vitest';
import { jobStateKey, jobStateSchema, type JobState } from '../../src/hub/job-state';
import { readRunDetails } from '../../src/hub/status';
import { BlobDocumentStore } from '../../src/fencing/blob-document-store';
import { FencedDocuments } from '../../src/fencing/fenced-documents';
import type { JobDefinition } from '../../src/jobs/job-definition';
import { runKeys } from '../../src/hub/run-record';
import type { SyntheticJobSpec } from '../../functions/synthetic-job';
import {
  createChunkOrchestrator,
  createFinalizeActivity,
  createProcessActivity,
  createRunOrchestrator,
  createSplitActivity,
  DURABLE_NAMES,
  runInstanceId,
  startDueRuns,
  type DurableActivityDeps,
  type RunInput,
} from '../../src/durable';
import { useAzurite } from '../support/azurite';
import { DurableSimulator, type InstanceRun } from '../support/durable-history';
import { useFakeDurable, type FakeDurableExtension } from '../support/durable-extension';
import { durableSynthetic } from '../support/durable-jobs';
import { waitFor } from '../support/edge-support';

const fixture = useAzurite();
const fakeDurable = useFakeDurable();
const Status = df.OrchestrationRuntimeStatus;

// The synthetic jobs' default schedule fires at midnight on 1 January.
const T0 = new Date('2025-12-31T23:59:30.000Z');
const T1 = new Date('2026-01-01T00:00:10.000Z');
const OCCURRENCE = '2026-01-01T00:00:00.000Z';
const at = (base: Date, seconds: number) => new Date(base.getTime() + seconds * 1000);

function hubDocs(prefix: string): BlobDocumentStore {
  return new BlobDocumentStore(fixture.blobService.getContainerClient(`${fixture.uniqueName(prefix)}-runs`));
}

/**
 * The durable engine on Azurite: the starter drives the real client against the fake extension;
 * each orchestration it starts is played by durable-functions' replay engine with the real
 * activities, and its end (completed or failed) is reported back to the extension.
 */
function durableHub(
  docs: BlobDocumentStore,
  durable: FakeDurableExtension,
  job: JobDefinition,
  activities: Partial<Record<string, (deps: DurableActivityDeps) => (input: unknown) => Promise<unknown>>> = {},
) {
  const jobs = new Map([[job.name, job]]);
  // Activities stamp records with the tick's clock, so deadlines are exact.
  const deps: DurableActivityDeps = { jobs, docs, clock: { date: () => T1 } };
  const make = (name: string, real: (deps: DurableActivityDeps) => (input: unknown) => Promise<unknown>) =>
    (activities[name] ?? real)(deps);
  const simulator = new DurableSimulator({
    seed: 3,
    orchestrators: {
      [DURABLE_NAMES.orchestrator]: createRunOrchestrator(jobs),
      [DURABLE_NAMES.chunk]: createChunkOrchestrator(jobs),
    },
    activities: {
      [DURABLE_NAMES.split]: make(DURABLE_NAMES.split, createSplitActivity),
      [DURABLE_NAMES.process]: make(DURABLE_NAMES.process, createProcessActivity),
      [DURABLE_NAMES.finalize]: make(DURABLE_NAMES.finalize, createFinalizeActivity),
    },
  });
  const tick = (now: Date) => startDueRuns({ jobs: [job], client: durable.port(), docs, epoch: 2, now });
  return {
    tick,
    /** Plays the started orchestration to its end as the extension would, and reports how it ended. */
    async play(runId: string): Promise<InstanceRun> {
      const instanceId = runInstanceId(runId);
      const start = durable.starts.find((s) => s.instanceId === instanceId);
      if (!start) throw new Error(`no orchestration was started for ${runId}`);
      durable.set(instanceId, Status.Running);
      const run = await simulator.run(start.name, instanceId, start.input as RunInput);
      if (durable.instances.get(instanceId)?.runtimeStatus === Status.Running) {
        const customStatus = run.customStatuses.at(-1);
        if (run.state === 'completed') durable.set(instanceId, Status.Completed, { output: run.output, customStatus });
        else durable.set(instanceId, Status.Failed, { output: run.error, customStatus });
      }
      return run;
    },
  };
}

async function activeOf(docs: BlobDocumentStore, job: string): Promise<string[] | undefined> {
  const states = new FencedDocuments<JobState>(docs, { parse: (v) => jobStateSchema.parse(v) });
  return (await states.read(jobStateKey(job)))?.value.active;
}

describe('durable runs always end, on Azurite', () => {
  it('an orchestration that fails leaves no run record running: the next tick ends it failed, saying why', async () => {
    const docs = hubDocs('failing');
    const durable = await fakeDurable();
    const spec: SyntheticJobSpec = { name: 'failing', items: 12, itemsPerMessage: 2 };
    const hub = durableHub(docs, durable, durableSynthetic(spec), {
      [DURABLE_NAMES.finalize]: () => async () => {
        throw new Error('the runs container is unavailable');
      },
    });
    await hub.tick(T0);
    const runId = `failing/${OCCURRENCE}`;
    expect((await hub.tick(T1)).started).toEqual([runId]);

    const run = await hub.play(runId);
    expect(run.state).toBe('failed');
    expect((await readRunDetails(docs, runId))?.record.state).toBe('running');

    const summary = await hub.tick(at(T1, 10));
    const details = await readRunDetails(docs, runId);
    expect(details?.record).toMatchObject({
      state: 'failed',
      counters: { planned: 12, succeeded: 12, failed: 0 },
      manifestKey: runKeys.manifest(runId),
      outputKey: null,
    });
    expect(details?.record.endReason).toMatch(
      /^its orchestration failed while the run was running: .*the runs container is unavailable/,
    );
    expect(details?.manifest).toEqual({ runId, state: 'failed', failedCount: 0, failureParts: [], missing: [], missingCount: 0 });
    expect(summary.ended).toEqual([{ runId, state: 'failed', reason: details?.record.endReason }]);
    expect(await activeOf(docs, 'failing')).toEqual([]);
  });

  it('a run past its deadline ends timed-out and its orchestration is stopped; its late finalize leaves it timed-out', async () => {
    const docs = hubDocs('slow');
    const durable = await fakeDurable();
    const spec: SyntheticJobSpec = { name: 'slow', items: 6, itemsPerMessage: 2, timeoutSeconds: 60 };
    let release!: () => void;
    const released = new Promise<void>((resolve) => (release = resolve));
    const hub = durableHub(docs, durable, durableSynthetic(spec), {
      [DURABLE_NAMES.process]: (deps) => {
        const real = createProcessActivity(deps);
        return async (input) => {
          await released;
          return real(input);
        };
      },
    });
    await hub.tick(T0);
    const runId = `slow/${OCCURRENCE}`;
    expect((await hub.tick(T1)).started).toEqual([runId]);
    const playing = hub.play(runId);
    try {
      await waitFor('the run to be planned', async () => (await readRunDetails(docs, runId))?.record.state === 'running');
      await hub.tick(at(T1, 60));
      expect((await readRunDetails(docs, runId))?.record.state).toBe('running');

      const reason = `still running at its deadline ${at(T1, 60).toISOString()}`;
      const summary = await hub.tick(at(T1, 61));
      const ended = await readRunDetails(docs, runId);
      expect(ended?.record).toMatchObject({ state: 'timed-out', endReason: reason, counters: { planned: 6 } });
      expect(ended?.manifest).toEqual({
        runId,
        state: 'timed-out',
        failedCount: 0,
        failureParts: [],
        missing: [],
        missingCount: 6,
      });
      expect(durable.instances.get(runInstanceId(runId))).toMatchObject({ runtimeStatus: Status.Terminated, output: reason });
      expect(summary.ended).toEqual([{ runId, state: 'timed-out', reason }]);

      // The replay engine knows nothing of the terminate: its activities finish, and finalize finds the run ended.
      release();
      const run = await playing;
      expect(run.output).toMatchObject({ runId, state: 'timed-out' });
      const after = await readRunDetails(docs, runId);
      expect(after?.record).toEqual(ended?.record);
      expect(after?.output).toBeUndefined();
    } finally {
      release();
      await playing.catch(() => undefined);
    }
    expect(await activeOf(docs, 'slow')).toEqual([]);
  });
});
