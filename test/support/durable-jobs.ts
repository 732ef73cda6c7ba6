import type { RunDetails } from '../../src/hub/status';
import type { DocumentStore } from '../../src/fencing/document-store';
import type { JobDefinition } from '../../src/jobs/job-definition';
import { createSyntheticJob, type SyntheticJobSpec, type SyntheticOutput } from '../../functions/synthetic-job';
import {
  createChunkOrchestrator,
  createFinalizeActivity,
  createProcessActivity,
  createRunOrchestrator,
  createSplitActivity,
  DURABLE_NAMES,
  runInstanceId,
  type DurableRunSettings,
  type RunInput,
} from '../../src/durable';
import { DurableSimulator, type InstanceRun, type SimulatorOptions } from './durable-history';
import { failuresOf } from './failures';

const SQUARES_MODULUS = 2_147_483_647;

/** The synthetic job's fold of two disjoint parts (the same as the one in `synthetic-job.ts`). */
export function mergeSynthetic(a: SyntheticOutput, b: SyntheticOutput): SyntheticOutput {
  return { count: a.count + b.count, sum: a.sum + b.sum, squares: (a.squares + b.squares) % SQUARES_MODULUS };
}

/** The job with `merge` in its aggregate. */
export function withMerge<Acc>(job: JobDefinition, merge: (a: Acc, b: Acc) => Acc): JobDefinition {
  return { ...job, aggregate: { ...job.aggregate, merge: merge as (a: unknown, b: unknown) => unknown } };
}

/**
 * A synthetic job the durable engine can run. `defineJob` does not pass `aggregate.merge` through
 * yet (its owner is wiring that), so the test's copy of the merge is added when it is missing;
 * once it is passed through, the job's own merge is used.
 */
export function durableSynthetic(spec: SyntheticJobSpec): JobDefinition {
  const job = createSyntheticJob(spec);
  return job.aggregate.merge ? job : withMerge(job, mergeSynthetic);
}

/** The durable engine on `docs`, its orchestrations replayed by durable-functions and played by the simulator. */
export function durableEngine(
  jobs: JobDefinition[],
  docs: DocumentStore,
  options: Omit<SimulatorOptions, 'orchestrators' | 'activities'> & {
    activities?: Partial<Record<string, (input: unknown) => Promise<unknown>>>;
  } = {},
) {
  const map = new Map(jobs.map((j) => [j.name, j]));
  const deps = { jobs: map, docs };
  const simulator = new DurableSimulator({
    ...options,
    orchestrators: {
      [DURABLE_NAMES.orchestrator]: createRunOrchestrator(map),
      [DURABLE_NAMES.chunk]: createChunkOrchestrator(map),
    },
    activities: {
      [DURABLE_NAMES.split]: createSplitActivity(deps),
      [DURABLE_NAMES.process]: createProcessActivity(deps),
      [DURABLE_NAMES.finalize]: createFinalizeActivity(deps),
      ...(options.activities as Record<string, (input: unknown) => Promise<unknown>>),
    },
  });
  return {
    simulator,
    /** Runs a scheduled run of `job` at `occurrence` to its end. */
    run(job: string, occurrence: string, settings: Partial<DurableRunSettings> = {}): Promise<InstanceRun & { runId: string }> {
      const runId = `${job}/${occurrence}`;
      const input: RunInput = { runId, job, occurrence, trigger: 'schedule', settings };
      return simulator.run(DURABLE_NAMES.orchestrator, runInstanceId(runId), input).then((r) => ({ ...r, runId }));
    },
  };
}

/**
 * What must agree between the engines for one run: everything but the run id, the occurrence,
 * timestamps and the keys of the failure parts; the failures those parts hold, by item.
 */
export async function comparableRun(docs: DocumentStore, details: RunDetails | undefined) {
  if (!details) return undefined;
  const { planned, dispatched, succeeded, failed } = details.record.counters;
  return {
    state: details.record.state,
    counters: { planned, dispatched, succeeded, failed },
    finalizeError: details.record.finalizeError,
    endReason: details.record.endReason,
    output: details.output && {
      ...details.output,
      runId: undefined,
      occurrence: undefined,
      counters: { ...details.output.counters, duplicates: 0 },
    },
    manifest: details.manifest && { ...details.manifest, runId: undefined, failureParts: undefined },
    failures: await failuresOf(docs, details.manifest),
  };
}
