import type { DocumentStore } from '../fencing/document-store';
import { FencedDocuments } from '../fencing/fenced-documents';
import type { LeaderRank } from '../lease/leader-rank';
import type { LeadershipChange, LeaseReader } from '../lease/lease-store';
import { isTerminal, runKeys, runRecordSchema, type RunRecord } from './run-record';
import type { FailuresManifest, RunOutput } from './run-output';
import { firstFailures, readFailures, readFailuresManifest } from './failures-manifest';
import { readFailureLog, type ReadFailureLogOptions } from './failure-log';
import type { FailureEntry } from './fold';
import { jobStateSchema, type JobState } from './job-state';

/** What anyone can read about a hub without leading it: the status the CLI and the live view show. */
export interface HubStatus {
  leader:
    | {
        identity: string | undefined;
        epoch: number;
        acquiredAt: string | undefined;
        ledForMs: number | undefined;
        /** When this holder took over from another: an idle leader's terms follow each other. */
        since: string | undefined;
        /** The holder's app version and priority, when it recorded them. */
        rank: LeaderRank | undefined;
      }
    | undefined;
  /** The last holder while nobody holds the lease (an idle hub frees it between ticks). */
  lastLeader: { identity: string; epoch: number; acquiredAt: string | undefined; rank: LeaderRank | undefined } | undefined;
  /**
   * While nobody holds the lease because its idle leader returned until it is next needed (the
   * next occurrence, or a trigger's wake): until when. Undefined while a leader holds it, or
   * once that time has passed.
   */
  restingUntil: string | undefined;
  /** Changes of holder, newest first, as the lease record keeps them. */
  leadershipChanges: LeadershipChange[];
  jobs: JobState[];
  activeRuns: RunRecord[];
}

export interface RunDetails {
  record: RunRecord;
  output: RunOutput | undefined;
  /** Names where the failures are; `readFailures` reads them. */
  manifest: FailuresManifest | undefined;
}

const records = (docs: DocumentStore) => new FencedDocuments<RunRecord>(docs, { parse: (v) => runRecordSchema.parse(v) });

export async function readHubStatus(
  docs: DocumentStore,
  lease: LeaseReader,
  /** `now` may be a function, called once the lease is read (storage time is known by then). */
  options: { now?: Date | (() => Date); abortSignal?: AbortSignal } = {},
): Promise<HubStatus> {
  const held = await lease.read(options);
  const now = typeof options.now === 'function' ? options.now() : (options.now ?? new Date());
  const leadershipChanges = [...(held.changes ?? [])].reverse();
  const leader = held.leased
    ? {
        identity: held.holder,
        epoch: held.epoch,
        acquiredAt: held.acquiredAt?.toISOString(),
        ledForMs: held.acquiredAt ? Math.max(0, now.getTime() - held.acquiredAt.getTime()) : undefined,
        since: leadershipChanges.find((c) => c.holder === held.holder)?.at.toISOString(),
        rank: held.holderRank,
      }
    : undefined;
  const lastLeader =
    !held.leased && held.holder !== undefined
      ? { identity: held.holder, epoch: held.epoch, acquiredAt: held.acquiredAt?.toISOString(), rank: held.holderRank }
      : undefined;
  const restingUntil =
    !held.leased && held.restingUntil && held.restingUntil.getTime() > now.getTime()
      ? held.restingUntil.toISOString()
      : undefined;
  const states = new FencedDocuments<JobState>(docs, { parse: (v) => jobStateSchema.parse(v) });
  const jobs: JobState[] = [];
  for await (const key of docs.list('jobs/', options)) {
    const state = await states.read(key, options);
    if (state) jobs.push(state.value);
  }
  const activeRuns: RunRecord[] = [];
  for (const runId of jobs.flatMap((j) => j.active)) {
    const run = await records(docs).read(runKeys.record(runId), options);
    if (run && !isTerminal(run.value.state)) activeRuns.push(run.value);
  }
  return { leader, lastLeader, restingUntil, leadershipChanges, jobs, activeRuns };
}

/** The jobs leaders have recorded in the hub (each has a job state), sorted. */
export async function listJobNames(docs: DocumentStore, options: { abortSignal?: AbortSignal } = {}): Promise<string[]> {
  const names: string[] = [];
  for await (const key of docs.list('jobs/', options)) names.push(key.replace(/^jobs\//, '').replace(/\.json$/, ''));
  return names.sort();
}

/**
 * Every failed item of a run with its reason, in the order they were counted: from the manifest
 * once the run has ended, else from the failure log its record names (those counted so far).
 */
export function readRunFailures(
  docs: DocumentStore,
  details: RunDetails,
  options: ReadFailureLogOptions = {},
): AsyncIterable<FailureEntry> {
  return details.manifest
    ? readFailures(docs, details.manifest, options)
    : readFailureLog(docs, details.record.failureParts, options);
}

/** The first `limit` failures of a run, as `show` lists them: its manifest's, or (open) those counted so far. */
export function firstRunFailures(
  docs: DocumentStore,
  details: RunDetails,
  limit: number,
  options: { abortSignal?: AbortSignal } = {},
) {
  return firstFailures(docs, details.manifest ?? details.record.failureParts, limit, options);
}

export async function readRunDetails(
  docs: DocumentStore,
  runId: string,
  options: { abortSignal?: AbortSignal } = {},
): Promise<RunDetails | undefined> {
  const run = await records(docs).read(runKeys.record(runId), options);
  if (!run) return undefined;
  const json = async <T>(key: string): Promise<T | undefined> => {
    const stored = await docs.read(key, options);
    return stored ? (JSON.parse(stored.body) as T) : undefined;
  };
  return {
    record: run.value,
    output: await json<RunOutput>(runKeys.output(runId)),
    manifest: await readFailuresManifest(docs, runId, options),
  };
}
