import { compareVersions } from '../src/lease/leader-rank';
import type { FailureEntry } from '../src/hub/fold';
import type { FailuresManifest, RunOutput } from '../src/hub/run-output';
import { isTerminal, type RunRecord } from '../src/hub/run-record';
import { runIndexEntries } from '../src/hub/run-index';
import type { AuditEntry } from './audit-trail';
import { accountForOccurrences, type OccurrenceAccount, type OccurrenceAccountInput } from './occurrence-accounting';

/** A run as it stands in storage at the end. */
export interface CheckedRun {
  record: RunRecord;
  /** The record's version in storage, to match against the audit trail. */
  etag?: string;
  output?: RunOutput;
  manifest?: FailuresManifest;
}

/** A message still on a queue at the end, with the run it names (if it names one). */
export interface Leftover {
  queue: string;
  id: string;
  run?: string;
}

/** What every run of one job must come to, known in advance. */
export interface Expectation {
  planned: number;
  output: unknown;
  /** Item indexes that fail on every attempt, ascending. */
  failed: readonly number[];
  /** How every run of the job must end, when its failures are known to be within its tolerance. */
  state?: 'succeeded' | 'failed';
  /** The fault that shaped this expectation, for one run; its own checks report as `fault-effect`. */
  fault?: string;
  /** What the run's end reason must say. */
  endReason?: RegExp;
  /** What the run's finalize error must say; `null`: it must have none. Unchecked when absent. */
  finalizeError?: RegExp | null;
  /** The reason the failures manifest must give for each failed item among `items`: the outcome that had to count. */
  reasons?: ReadonlyArray<{ items: readonly number[]; reason: RegExp }>;
}

/** One term of leadership, as its holder reported taking it. */
export interface Term {
  holder: string;
  /** The epoch it took the lease with. */
  epoch: number;
  /** When the holder took it (ms since the epoch, the holder's clock: every instance runs on one machine). */
  at: number;
  /** The highest epoch it raised its own to, above a stored one, if it did. */
  raisedTo?: number;
  /** The holder's app version. */
  version?: string;
}

export const INVARIANTS = {
  'one-output': 'at most one output per run',
  'output-correct': 'the output equals the expected aggregate',
  'counts-add-up': 'succeeded + failed = planned, and failed is exactly the deterministic failures',
  'one-run-per-occurrence': 'no occurrence has two runs',
  'epoch-order': 'no accepted write carries an epoch lower than one accepted before it on the same document',
  'conditional-writes': 'every write to a fenced document names the version it replaces (or creates)',
  'queues-drained': 'no message is left in the work or results queues for a terminal run',
  'terminal-in-time': 'every run is terminal within its timeout after the faults stop',
  'expected-state': 'every run of a test job ends the way its design says (succeeded), and each job has runs',
  'audit-complete': 'the audit trail holds every write of every run record, so the order checks saw them all',
  readable: 'every run record, output and manifest can be read',
  'one-run-per-key':
    'every trigger with one idempotency key, from however many clients at once, named the same run, and that run exists',
  'run-indexed': "every run is in the hub's run index and its job's, at its creation time, so a page of runs lists it",
  'fault-effect': 'a run a fault targeted ends the way that fault is documented to end it, and no other run shows its effect',
  'epoch-monotonic':
    'every term of leadership takes a higher epoch than every epoch led with before it, also after the lease record is deleted',
  'deploy-takeover':
    'in a rolling deploy, an instance of the new version leads within a loose bound (30 s, times the slowdown) of the first one starting, and no older version leads after it',
  'frozen-timer-ticks': 'with every timer frozen, runs still start: never more than a schedule period and 30 s apart',
  'occurrences-accounted':
    "every occurrence due while the faults ran (by its job's zone and jitter) has exactly one run, started no earlier than it was due and within the SIGKILL bound after it (or after a fault under way then), or is recorded as skipped for an overlap or missed while a fault was under way; no run is for an instant its job's schedule does not name",
  'straggler-makespan':
    "a run whose work messages a stopped worker held ended before the worker came back, and within twice its job's median clean makespan plus its hedge wait",
} as const;
export type InvariantRule = keyof typeof INVARIANTS;

export interface Violation {
  rule: InvariantRule;
  /** The run or document it is about. */
  subject: string;
  evidence: string;
}

export interface CheckInput {
  runs: readonly CheckedRun[];
  leftovers: readonly Leftover[];
  /** By job name; runs of other jobs get the checks that need no expectation. */
  expectations: ReadonlyMap<string, Expectation>;
  /** By run id, in place of its job's: runs a fault was aimed at. */
  runExpectations?: ReadonlyMap<string, Expectation>;
  /** Every term of leadership the instances reported; without it, `epoch-monotonic` is not checked. */
  terms?: readonly Term[];
  /** When the lease record (its blob or its container) was deleted, each time (ms since the epoch). */
  leaseDeletions?: readonly number[];
  /** Rolling deploys: the new version, when its first instance started and when one of them led. */
  deploys?: readonly Deploy[];
  /** How long a deploy's new version may take to lead; default `DEPLOY_TAKEOVER_MS`. */
  deployTakeoverMs?: number;
  /** The test jobs' occurrences to account for; without it, `occurrences-accounted` is not checked. */
  occurrences?: Omit<OccurrenceAccountInput, 'runs'>;
  /** Windows in which every instance's timers were off, and how long starts may be apart when a job keeps to its schedule. */
  frozenTimers?: { windows: ReadonlyArray<{ from: number; to: number }>; periodMs: number };
  /** Workers stopped while they held work messages, and what the runs they hit are judged against; without it, `straggler-makespan` is not checked. */
  stragglers?: StragglerInput;
  /** Accepted and refused blob writes as storage answered them; without it, the write-order checks are skipped. */
  audit?: readonly AuditEntry[];
  /** When the faults stopped (ms since the epoch); default: the runs' own creation times. */
  faultsStoppedAt?: number;
  /** Allowed on top of a run's timeout for a leader to notice it. Default 15 s. */
  graceMs?: number;
  /** When the check runs (ms since the epoch); a run still open before its bound is noted, not a violation. Default now. */
  now?: number;
  unreadable?: ReadonlyArray<{ key: string; reason: string }>;
  /** Triggers made with one key each (the soak's `keyed-trigger` faults), and the run ids they were answered with. */
  keyedTriggers?: ReadonlyArray<{ key: string; runs: readonly string[] }>;
  /** Every key under the run index; without it, `run-indexed` is not checked. */
  indexEntries?: ReadonlySet<string>;
  /** Messages on the queues the snapshot could not see. */
  unseenMessages?: number;
  /**
   * Reads a manifest's failures from storage, passing parts storage no longer has to
   * `onMissing` (the snapshot gives one). Without it, only failures listed inline are read.
   */
  failuresOf?: (manifest: FailuresManifest, onMissing: (key: string) => void) => AsyncIterable<FailureEntry>;
}

export interface CheckResult {
  runsChecked: number;
  /** Runs by state. */
  states: Record<string, number>;
  violations: Violation[];
  /** What could not be checked, and why. */
  notes: string[];
  audit?: { writes: number; accepted: number; refused: number; documents: number };
  /** How the occurrences due while the faults ran were accounted for. */
  occurrences?: Omit<OccurrenceAccount, 'violations'>;
  /** Each run a straggler hit: its makespan beside its job's clean ones, and when it ended beside the straggler's return. */
  stragglers?: StragglerTally[];
}

/**
 * Checks the reliability invariants over everything a hub wrote. The caller reads storage (and
 * the audit trail) and passes it in, so the same rules run on a soak's end state, on any storage
 * account, and in table tests; only the failures are read as they are checked (`failuresOf`),
 * since a run may have more of them than fit in memory.
 */
export async function checkInvariants(input: CheckInput): Promise<CheckResult> {
  const violations: Violation[] = [];
  const notes: string[] = [];
  const states: Record<string, number> = {};
  for (const run of input.runs) {
    states[run.record.state] = (states[run.record.state] ?? 0) + 1;
    violations.push(...(await checkRun(run, input)));
  }
  for (const { key, reason } of input.unreadable ?? []) violations.push({ rule: 'readable', subject: key, evidence: reason });
  const runIds = new Set(input.runs.map((r) => r.record.runId));
  for (const { key, runs } of input.keyedTriggers ?? []) {
    if (runs.length !== 1)
      violations.push({ rule: 'one-run-per-key', subject: key, evidence: `its triggers named ${runs.join(', ')}` });
    for (const runId of runs.filter((id) => !runIds.has(id))) {
      violations.push({ rule: 'one-run-per-key', subject: key, evidence: `its run ${runId} was never created` });
    }
  }
  for (const [job, expected] of input.expectations) {
    if (expected.state && !input.runs.some((r) => r.record.job === job)) {
      violations.push({ rule: 'expected-state', subject: job, evidence: 'no run of this job was found' });
    }
  }
  const open = input.runs.filter((r) => !isTerminal(r.record.state) && !pastBound(r.record, input)).length;
  if (open) notes.push(`${open} run(s) still open within their timeout: not yet judged`);
  if (input.unseenMessages) notes.push(`${input.unseenMessages} queued message(s) were hidden or past a peek, so not checked`);
  violations.push(...checkOccurrences(input.runs));
  violations.push(...checkLeftovers(input.runs, input.leftovers, notes));
  if (input.terms) violations.push(...checkTerms(input.terms, input.leaseDeletions ?? []));
  if (input.terms && input.deploys) violations.push(...checkDeploys(input.deploys, input.terms, input.deployTakeoverMs));
  if (input.frozenTimers) violations.push(...checkFrozenTimers(input.runs, input.frozenTimers));
  let stragglers: StragglerTally[] | undefined;
  if (input.stragglers) {
    const found = checkStragglers(
      input.runs.map((r) => r.record),
      input.stragglers,
    );
    violations.push(...found.violations);
    notes.push(...found.notes);
    stragglers = found.tally;
  }
  let occurrences: CheckResult['occurrences'];
  if (input.occurrences) {
    const { violations: found, ...tally } = accountForOccurrences({
      ...input.occurrences,
      runs: input.runs.map((r) => r.record),
    });
    violations.push(...found);
    occurrences = tally;
    if (tally.unchecked)
      notes.push(`${tally.unchecked} occurrence(s) not run and older than the job states' recent events: not accounted for`);
  } else notes.push('no schedule window: occurrences-accounted was not checked');
  if (!input.terms) notes.push('no terms of leadership: epoch-monotonic was not checked');
  for (const runId of input.runExpectations?.keys() ?? []) {
    if (!input.runs.some((r) => r.record.runId === runId)) {
      violations.push({
        rule: 'fault-effect',
        subject: runId,
        evidence: 'a fault was aimed at this run, and it has no run record',
      });
    }
  }
  let audit: CheckResult['audit'];
  if (input.audit) {
    violations.push(
      ...checkOutputWrites(input.audit),
      ...checkCreates(input.audit),
      ...checkEpochOrder(input.audit),
      ...checkAuditComplete(input.runs, input.audit, notes),
    );
    const accepted = input.audit.filter((e) => e.status < 300).length;
    audit = {
      writes: input.audit.length,
      accepted,
      refused: input.audit.filter((e) => e.status === 409 || e.status === 412).length,
      documents: new Set(input.audit.map((e) => e.key)).size,
    };
  } else {
    notes.push('no audit trail: write order and the count of output writes were not checked');
  }
  const unexpected = [...new Set(input.runs.map((r) => r.record.job))].filter((job) => !input.expectations.has(job));
  if (unexpected.length) notes.push(`no expected output for job(s) ${unexpected.join(', ')}: their outputs were not compared`);
  return {
    runsChecked: input.runs.length,
    states,
    violations,
    notes,
    ...(audit ? { audit } : {}),
    ...(occurrences ? { occurrences } : {}),
    ...(stragglers ? { stragglers } : {}),
  };
}

/** The latest a run may end: its timeout counted from when it was created or the faults stopped, plus grace. */
function boundOf(record: RunRecord, input: CheckInput): number {
  const timeoutMs = Date.parse(record.deadlineAt) - Date.parse(record.createdAt);
  return Math.max(Date.parse(record.createdAt), input.faultsStoppedAt ?? 0) + timeoutMs + (input.graceMs ?? 15_000);
}
const pastBound = (record: RunRecord, input: CheckInput): boolean => (input.now ?? Date.now()) > boundOf(record, input);

async function checkRun(run: CheckedRun, input: CheckInput): Promise<Violation[]> {
  const { record, output, manifest } = run;
  const out: Violation[] = [];
  const v = (rule: InvariantRule, evidence: string) => out.push({ rule, subject: record.runId, evidence });
  const expected = input.runExpectations?.get(record.runId) ?? input.expectations.get(record.job);
  const { planned, succeeded, failed } = record.counters;

  if (input.indexEntries) {
    const missing = runIndexEntries(record).filter((key) => !input.indexEntries?.has(key));
    if (missing.length > 0) v('run-indexed', `no index entry ${missing.join(', ')}`);
  }

  const bound = boundOf(record, input);
  if (!isTerminal(record.state)) {
    if (pastBound(record, input)) {
      v(
        'terminal-in-time',
        `still ${record.state} at the end, past ${new Date(bound).toISOString()} (created ${record.createdAt})`,
      );
    }
    return out;
  }
  const endedAt = record.endedAt ? Date.parse(record.endedAt) : Number.NaN;
  if (!(endedAt <= bound)) {
    v('terminal-in-time', `${record.state} at ${record.endedAt}, later than ${new Date(bound).toISOString()}`);
  }
  if (expected?.state && record.state !== expected.state) {
    // The counters say where a run stuck: planning, dispatch, or items never counted.
    const c = record.counters;
    const where = `planned ${c.planned}, dispatched ${c.dispatched}, succeeded ${c.succeeded}, failed ${c.failed}, duplicates ${c.duplicates}`;
    v(
      'expected-state',
      `${record.state}, expected ${expected.state}${record.endReason ? `: ${record.endReason}` : ''} (${where})`,
    );
  }
  if (expected) out.push(...checkFaultEffect(run, expected));

  // Finalized: every item was counted before the output was written (succeeded, or failed beyond tolerance).
  const finalized = record.state === 'succeeded' || (record.state === 'failed' && record.outputKey !== null);
  if (output) {
    if (output.runId !== record.runId) v('one-output', `output.json names run ${output.runId}`);
    if (!finalized) v('one-output', `an output exists for a ${record.state} run that was not finalized`);
    // Duplicates may still be counted after the output is written; the item counts may not change.
    const counted = (c: RunRecord['counters']) => `${c.planned}/${c.succeeded}/${c.failed}`;
    if (counted(output.counters) !== counted(record.counters)) {
      v(
        'counts-add-up',
        `output counts (planned/succeeded/failed) ${counted(output.counters)} differ from the record's ${counted(record.counters)}`,
      );
    }
  } else if (finalized) {
    v('one-output', `${record.state} without an output document`);
  }

  const tally = manifest ? await tallyFailures(manifest, expected, input, out, record.runId) : undefined;
  if (finalized) {
    if (succeeded + failed !== planned) v('counts-add-up', `succeeded ${succeeded} + failed ${failed} ≠ planned ${planned}`);
    if (!tally) v('counts-add-up', `${record.state} without a failures manifest`);
    else if (tally.count !== failed) v('counts-add-up', `the manifest lists ${tally.count} failed items, the counters ${failed}`);
  } else if (manifest && succeeded + failed + manifest.missingCount < planned) {
    // Ended early (timed out, cancelled, or failed by repeated step errors): every item is
    // counted or listed missing. Results folded after the manifest can only add to the counts.
    v('counts-add-up', `succeeded ${succeeded} + failed ${failed} + missing ${manifest.missingCount} < planned ${planned}`);
  }
  if (manifest && tally && !tally.unreadable && tally.count !== manifest.failedCount) {
    v('counts-add-up', `the manifest says ${manifest.failedCount} items failed and lists ${tally.count}`);
  }
  if (!expected) return out;

  // A run that failed before planning has planned 0; anything else must plan every item.
  if (planned !== expected.planned && !(record.state !== 'succeeded' && planned === 0)) {
    v('counts-add-up', `planned ${planned}, expected ${expected.planned}`);
  }
  if (tally) {
    if (tally.extra.length)
      v('counts-add-up', `items failed that never fail by design: ${sample(tally.extra, tally.extraCount)}`);
    if (finalized) {
      const missed = expected.failed.filter((i) => !tally.listed.has(i));
      if (missed.length) v('counts-add-up', `items that always fail are not listed as failed: ${sample(missed)}`);
    }
  }
  if (record.state === 'succeeded' && output && JSON.stringify(output.output) !== JSON.stringify(expected.output)) {
    v('output-correct', `output ${JSON.stringify(output.output)}, expected ${JSON.stringify(expected.output)}`);
  }
  return out;
}

/**
 * What a fault aimed at a run must have done to it (its end reason, its finalize error, the
 * reason each targeted item failed with), and, for every other run, that it shows no finalize
 * error: only a hung finalize gives one to the test jobs.
 */
function checkFaultEffect(run: CheckedRun, expected: Expectation): Violation[] {
  const { record } = run;
  const out: Violation[] = [];
  const by = expected.fault ? `${expected.fault}: ` : '';
  const v = (evidence: string) => out.push({ rule: 'fault-effect', subject: record.runId, evidence: `${by}${evidence}` });
  if (expected.endReason && !expected.endReason.test(record.endReason ?? '')) {
    v(`ended ${record.state} with reason ${JSON.stringify(record.endReason)}, expected one matching ${expected.endReason}`);
  }
  if (expected.finalizeError === null && record.finalizeError !== null) {
    v(`a finalize error no fault explains: ${JSON.stringify(record.finalizeError)}`);
  } else if (expected.finalizeError && !expected.finalizeError.test(record.finalizeError ?? '')) {
    v(`finalize error ${JSON.stringify(record.finalizeError)}, expected one matching ${expected.finalizeError}`);
  }
  return out;
}

/** What the checks keep of a run's failures while reading them: never the whole list. */
interface FailureTally {
  count: number;
  /** Listed items among those that fail by design. */
  listed: Set<number>;
  /** The first items listed that never fail by design, and how many there were. */
  extra: number[];
  extraCount: number;
  /** Parts of the failure log storage no longer had, or that were not JSON. */
  unreadable: number;
}

/**
 * Reads the manifest's failures once, checking each failed item's reason against what a fault
 * aimed at it must have left (`fault-effect`) and reporting parts storage lost (`readable`).
 */
async function tallyFailures(
  manifest: FailuresManifest,
  expected: Expectation | undefined,
  input: CheckInput,
  out: Violation[],
  runId: string,
): Promise<FailureTally> {
  const tally: FailureTally = { count: 0, listed: new Set(), extra: [], extraCount: 0, unreadable: 0 };
  const byDesign = expected && new Set(expected.failed);
  const reasons = (expected?.reasons ?? []).map(({ items, reason }) => ({ items: new Set(items), reason }));
  const by = expected?.fault ? `${expected.fault}: ` : '';
  const onMissing = (key: string) => {
    tally.unreadable++;
    out.push({ rule: 'readable', subject: runId, evidence: `the manifest names ${key}, which storage no longer has` });
  };
  const failures = input.failuresOf ? input.failuresOf(manifest, onMissing) : (manifest.failed ?? []);
  try {
    for await (const entry of failures) {
      tally.count++;
      if (byDesign?.has(entry.item)) tally.listed.add(entry.item);
      else if (byDesign && tally.extraCount++ < SAMPLED) tally.extra.push(entry.item);
      for (const { items, reason } of reasons) {
        if (!items.has(entry.item) || reason.test(entry.reason)) continue;
        const evidence = `${by}item ${entry.item} failed with ${JSON.stringify(entry.reason)}, expected a reason matching ${reason}`;
        out.push({ rule: 'fault-effect', subject: runId, evidence });
      }
    }
  } catch (err) {
    if (!(err instanceof SyntaxError)) throw err;
    tally.unreadable++;
    out.push({ rule: 'readable', subject: runId, evidence: `its failure log is not JSON: ${err.message}` });
  }
  return tally;
}

export interface Deploy {
  version: string;
  /** When the first instance of `version` had started (ms since the epoch). */
  startedAt: number;
  /** When an instance of `version` first took the lease after that; null if none did. */
  takeoverAt: number | null;
}

/**
 * The soak's bound on a deploy's takeover, measured from the new version's first start: loose, so
 * it holds on a loaded machine (the new version asks on its first tick, and the holder yields at
 * its next safe point). How fast it is belongs to the start-lag benchmark's rolling scenario,
 * where it is measured against a floor; here, that it happens and that it sticks.
 */
export const DEPLOY_TAKEOVER_MS = 30_000;

/** Each deploy's new version must lead within `boundMs` of its first instance starting, and no older one after that. */
export function checkDeploys(deploys: readonly Deploy[], terms: readonly Term[], boundMs = DEPLOY_TAKEOVER_MS): Violation[] {
  const out: Violation[] = [];
  for (const deploy of deploys) {
    const subject = `deploy of ${deploy.version}`;
    if (deploy.takeoverAt === null) {
      out.push({
        rule: 'deploy-takeover',
        subject,
        evidence: 'no instance of the new version took the lease while the old ones ran',
      });
      continue;
    }
    const ms = deploy.takeoverAt - deploy.startedAt;
    if (ms > boundMs) {
      out.push({
        rule: 'deploy-takeover',
        subject,
        evidence: `the new version led ${ms} ms after its first instance started (bound ${boundMs} ms)`,
      });
    }
    for (const term of terms) {
      if (term.at >= deploy.takeoverAt && term.version !== undefined && compareVersions(term.version, deploy.version) < 0) {
        out.push({
          rule: 'deploy-takeover',
          subject,
          evidence: `${term.holder} (version ${term.version}) took epoch ${term.epoch} at ${new Date(term.at).toISOString()}, after ${deploy.version} led`,
        });
      }
    }
  }
  return out;
}

/**
 * Inside each window with every timer frozen, the gaps between run creations (and from the
 * window's start to the first, and from the last to its end) stay within a schedule period and
 * 30 s: only tick messages can have started those runs.
 */
export function checkFrozenTimers(
  runs: readonly CheckedRun[],
  frozen: { windows: ReadonlyArray<{ from: number; to: number }>; periodMs: number },
): Violation[] {
  const bound = frozen.periodMs + 30_000;
  const created = runs.map((r) => Date.parse(r.record.createdAt)).sort((a, b) => a - b);
  const out: Violation[] = [];
  for (const { from, to } of frozen.windows) {
    const inside = [from, ...created.filter((t) => t > from && t < to), to];
    for (let i = 1; i < inside.length; i++) {
      const gap = inside[i]! - inside[i - 1]!;
      if (gap > bound) {
        out.push({
          rule: 'frozen-timer-ticks',
          subject: `timers frozen ${new Date(from).toISOString()}..${new Date(to).toISOString()}`,
          evidence: `no run started for ${gap} ms from ${new Date(inside[i - 1]!).toISOString()} (bound ${bound} ms)`,
        });
      }
    }
  }
  return out;
}

/** A worker stopped (SIGSTOP) while it held work messages of `runs`, from `stoppedAt` until `resumedAt` (ms since the epoch). */
export interface StragglerHit {
  instance: string;
  runs: readonly string[];
  stoppedAt: number;
  resumedAt: number;
}

export interface StragglerInput {
  hits: readonly StragglerHit[];
  /**
   * A job's clean runs: those open only within [from, to] (while the faults ran, before the
   * settling redeploy stops every instance), during no fault window, and aimed at by no fault.
   */
  from: number;
  to: number;
  faults: ReadonlyArray<{ from: number; to: number }>;
  aimed: ReadonlySet<string>;
  /**
   * By job, how long a straggling message waits before its leader sends a copy: the job's
   * `hedge.minWaitSeconds`, or its process bound plus grace if that is longer (the wait while too
   * few messages have reported a duration); 0 when the job does not hedge.
   */
  hedgeWaitMs: ReadonlyMap<string, number>;
}

export interface StragglerTally {
  run: string;
  instance: string;
  /** From the run's creation to its end; null if it has not ended. */
  makespanMs: number | null;
  /** The median makespan of its job's clean runs (null: there were none), and how many there were. */
  cleanMs: number | null;
  cleanRuns: number;
  hedgeWaitMs: number;
  boundMs: number | null;
  /** How long the worker was stopped. */
  stoppedMs: number;
  /** How long before the worker came back the run ended; negative if after it, null if it has not ended. */
  endedBeforeResumeMs: number | null;
  /** Copies its leaders sent, and results counted twice. */
  hedges: number;
  duplicates: number;
}

const openSpan = (r: RunRecord): { from: number; to: number } | undefined =>
  r.endedAt ? { from: Date.parse(r.createdAt), to: Date.parse(r.endedAt) } : undefined;

/**
 * A run whose messages a stopped worker held must not wait for that worker: its messages stay
 * hidden while it is stopped, so only a copy (hedged dispatch) can end the run before the worker
 * comes back. Each such run must have ended before the worker was resumed, and within
 *
 *   2 × (the median makespan of its job's clean runs) + its hedge wait
 *
 * of its creation: the rest of the run, as a clean run of its job takes it; then the wait before
 * the copy goes; then the copy's own trip through a worker, the results queue and the run's end,
 * no longer than a clean run's whole makespan. The median, not the longest, as one clean run slow
 * for reasons the check cannot see (a cold first run, a successor leader warming up after a
 * fault) would otherwise loosen the bound for every run. The clean runs are of the same soak, so
 * the bound follows the machine's load and needs no slowdown factor. Without a clean run of the
 * job only the first half is checked, and a note says so.
 */
export function checkStragglers(
  runs: readonly RunRecord[],
  input: StragglerInput,
): { violations: Violation[]; tally: StragglerTally[]; notes: string[] } {
  const violations: Violation[] = [];
  const notes: string[] = [];
  const tally: StragglerTally[] = [];
  const byId = new Map(runs.map((r) => [r.runId, r]));
  const hit = new Set(input.hits.flatMap((h) => h.runs));
  const cleanOf = (job: string): number[] =>
    runs.flatMap((r) => {
      const span = openSpan(r);
      if (r.job !== job || r.state !== 'succeeded' || !span || input.aimed.has(r.runId) || hit.has(r.runId)) return [];
      if (span.from < input.from || span.to > input.to) return [];
      if (input.faults.some((f) => f.from <= span.to && f.to >= span.from)) return [];
      return [span.to - span.from];
    });
  for (const straggler of input.hits) {
    for (const runId of straggler.runs) {
      const v = (evidence: string) => violations.push({ rule: 'straggler-makespan', subject: runId, evidence });
      const record = byId.get(runId);
      const stoppedMs = straggler.resumedAt - straggler.stoppedAt;
      const by = `${straggler.instance} was stopped ${stoppedMs} ms holding its messages`;
      if (!record) {
        v(`${by}, and the run has no run record`);
        continue;
      }
      const clean = cleanOf(record.job);
      const cleanMs = median(clean);
      const hedgeWaitMs = input.hedgeWaitMs.get(record.job) ?? 0;
      const boundMs = cleanMs === null ? null : 2 * cleanMs + hedgeWaitMs;
      const span = isTerminal(record.state) ? openSpan(record) : undefined;
      const makespanMs = span ? span.to - span.from : null;
      tally.push({
        run: runId,
        instance: straggler.instance,
        makespanMs,
        cleanMs,
        cleanRuns: clean.length,
        hedgeWaitMs,
        boundMs,
        stoppedMs,
        endedBeforeResumeMs: span ? straggler.resumedAt - span.to : null,
        hedges: record.hedges,
        duplicates: record.counters.duplicates,
      });
      if (!span || makespanMs === null) {
        v(`${by}, and the run is still ${record.state} at the end`);
        continue;
      }
      if (span.to >= straggler.resumedAt) {
        v(
          `${by}; the run ended ${span.to - straggler.resumedAt} ms after it was resumed, ${makespanMs} ms after its ` +
            'creation: it waited for the worker to come back rather than for a copy of its messages',
        );
      }
      if (boundMs === null) {
        notes.push(
          `no clean run of ${record.job} to bound the makespan of ${runId} by; only its end before the straggler's return was checked`,
        );
      } else if (makespanMs > boundMs) {
        v(
          `${by}; the run took ${makespanMs} ms from creation to end, over its bound of ${boundMs} ms: twice the median ` +
            `of ${clean.length} clean run(s) of ${record.job} (${cleanMs} ms) and its hedge wait (${hedgeWaitMs} ms)`,
        );
      }
    }
  }
  return { violations, tally, notes };
}

function median(values: readonly number[]): number | null {
  if (values.length === 0) return null;
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 ? (sorted[mid] as number) : Math.round(((sorted[mid - 1] as number) + (sorted[mid] as number)) / 2);
}

/**
 * Terms in the order they were taken. Each must take a higher epoch than every earlier term led
 * with, or the fence cannot tell its writes from theirs. A deleted lease record is no excuse:
 * its count restarts, but the epoch mark in the hub's container keeps the count, so the next
 * holder still takes an epoch above every one before (docs/architecture.md). The deletions are
 * named in the evidence.
 */
export function checkTerms(terms: readonly Term[], leaseDeletions: readonly number[]): Violation[] {
  const out: Violation[] = [];
  const at = (t: number) => new Date(t).toISOString();
  const deletions = [...leaseDeletions].sort((a, b) => a - b);
  let highest: { epoch: number; term: Term } | undefined;
  for (const term of [...terms].sort((a, b) => a.at - b.at)) {
    if (highest && term.epoch <= highest.epoch) {
      const before = highest;
      const between = deletions.filter((d) => d > before.term.at && d <= term.at);
      out.push({
        rule: 'epoch-monotonic',
        subject: `epoch ${term.epoch}`,
        evidence:
          `${term.holder} took epoch ${term.epoch} at ${at(term.at)}, after ${before.term.holder} had led with epoch ` +
          `${before.epoch} (taken at ${at(before.term.at)}), and ` +
          (between.length
            ? `the lease record was deleted in between (at ${between.map(at).join(', ')}): the epoch mark did not keep the count`
            : 'the lease record was not deleted in between'),
      });
    }
    const led = Math.max(term.epoch, term.raisedTo ?? 0);
    if (!highest || led > highest.epoch) highest = { epoch: led, term };
  }
  return out;
}

function checkOccurrences(runs: readonly CheckedRun[]): Violation[] {
  const byOccurrence = new Map<string, string[]>();
  for (const { record } of runs) {
    if (record.occurrence === null) continue;
    const key = `${record.job} @ ${record.occurrence}`;
    byOccurrence.set(key, [...(byOccurrence.get(key) ?? []), record.runId]);
  }
  return [...byOccurrence]
    .filter(([, ids]) => ids.length > 1)
    .map(([key, ids]) => ({ rule: 'one-run-per-occurrence', subject: key, evidence: `runs ${ids.join(', ')}` }));
}

function checkLeftovers(runs: readonly CheckedRun[], leftovers: readonly Leftover[], notes: string[]): Violation[] {
  const byId = new Map(runs.map((r) => [r.record.runId, r.record]));
  const out: Violation[] = [];
  const perRun = new Map<string, Leftover[]>();
  let unknown = 0;
  for (const left of leftovers) {
    const record = left.run ? byId.get(left.run) : undefined;
    if (!record) {
      unknown++;
      continue;
    }
    if (isTerminal(record.state)) perRun.set(record.runId, [...(perRun.get(record.runId) ?? []), left]);
  }
  for (const [runId, left] of perRun) {
    const queues = [...new Set(left.map((l) => l.queue))].join(', ');
    out.push({
      rule: 'queues-drained',
      subject: runId,
      evidence: `${left.length} message(s) left on ${queues} after the run ended`,
    });
  }
  if (unknown) notes.push(`${unknown} message(s) left on the queues name no known run`);
  return out;
}

const accepted = (e: AuditEntry): boolean => e.status >= 200 && e.status < 300;
const runOf = (key: string, leaf: string): string | undefined =>
  key.startsWith('runs/') && key.endsWith(`/${leaf}`) ? key.slice('runs/'.length, -leaf.length - 1) : undefined;

function checkOutputWrites(audit: readonly AuditEntry[]): Violation[] {
  const counts = new Map<string, number>();
  for (const entry of audit) {
    const run = runOf(entry.key, 'output.json');
    if (run !== undefined && accepted(entry)) counts.set(run, (counts.get(run) ?? 0) + 1);
  }
  return [...counts]
    .filter(([, n]) => n > 1)
    .map(([run, n]) => ({ rule: 'one-output', subject: run, evidence: `storage accepted ${n} writes of its output` }));
}

function checkCreates(audit: readonly AuditEntry[]): Violation[] {
  const counts = new Map<string, number>();
  for (const entry of audit) {
    const run = runOf(entry.key, 'run.json');
    if (run !== undefined && accepted(entry) && entry.ifNoneMatch === '*') counts.set(run, (counts.get(run) ?? 0) + 1);
  }
  return [...counts]
    .filter(([, n]) => n > 1)
    .map(([run, n]) => ({ rule: 'one-run-per-occurrence', subject: run, evidence: `its run record was created ${n} times` }));
}

/**
 * Puts each fenced document's accepted writes in storage's order, by following the version
 * each one replaced (`If-Match`) from the one that created it, then checks that the epochs
 * never go down. A write with no condition at all cannot be fenced, so it is reported too.
 */
export function checkEpochOrder(audit: readonly AuditEntry[]): Violation[] {
  const byKey = new Map<string, AuditEntry[]>();
  for (const entry of audit) {
    if (!accepted(entry) || entry.epoch === undefined) continue;
    byKey.set(entry.key, [...(byKey.get(entry.key) ?? []), entry]);
  }
  const out: Violation[] = [];
  for (const [key, writes] of byKey) {
    for (const w of writes) {
      if (!w.ifMatch && !w.ifNoneMatch) {
        out.push({
          rule: 'conditional-writes',
          subject: key,
          evidence: `a write with epoch ${w.epoch} at ${new Date(w.at).toISOString()} had no If-Match or If-None-Match`,
        });
      }
    }
    let highest: AuditEntry | undefined;
    for (const w of storageOrder(writes)) {
      if (highest && (w.epoch as number) < (highest.epoch as number)) {
        out.push({
          rule: 'epoch-order',
          subject: key,
          evidence:
            `epoch ${w.epoch} (${w.state ?? 'write'} at ${new Date(w.at).toISOString()}) accepted after ` +
            `epoch ${highest.epoch} (${highest.state ?? 'write'} at ${new Date(highest.at).toISOString()})`,
        });
      }
      if (!highest || (w.epoch as number) > (highest.epoch as number)) highest = w;
    }
  }
  return out;
}

/**
 * Every version of a run record must come from an audited write: its create, each `If-Match`
 * it replaced, and the version storage holds now. A version nobody audited is a hole the order
 * checks could not see into, unless a write whose answer was lost (status 0) accounts for it.
 */
function checkAuditComplete(runs: readonly CheckedRun[], audit: readonly AuditEntry[], notes: string[]): Violation[] {
  const byKey = new Map<string, AuditEntry[]>();
  for (const entry of audit) byKey.set(entry.key, [...(byKey.get(entry.key) ?? []), entry]);
  const out: Violation[] = [];
  let explained = 0;
  for (const run of runs) {
    const key = `runs/${run.record.runId}/run.json`;
    const writes = byKey.get(key) ?? [];
    const versions = new Set(writes.filter(accepted).map((w) => w.etag));
    const lost = writes.filter((w) => w.status === 0).length;
    const holes: string[] = [];
    if (!writes.some((w) => accepted(w) && w.ifNoneMatch === '*')) holes.push('no audited create');
    for (const w of writes.filter(accepted)) {
      if (w.ifMatch && !versions.has(w.ifMatch)) holes.push(`a write replaced version ${w.ifMatch}, which no audited write made`);
    }
    if (run.etag && !versions.has(run.etag)) holes.push(`the stored version ${run.etag} was made by no audited write`);
    if (holes.length > lost) out.push({ rule: 'audit-complete', subject: run.record.runId, evidence: holes.join('; ') });
    else if (holes.length) explained += holes.length;
  }
  if (explained)
    notes.push(`${explained} version(s) of run records came from writes whose answer storage never gave (a restart)`);
  return out;
}

const order = (e: AuditEntry): number => e.seq ?? e.at;

/** Writes linked by ETag in chain order; anything the chain cannot place goes in by the order storage answered. */
function storageOrder(writes: readonly AuditEntry[]): AuditEntry[] {
  const byTime = [...writes].sort((a, b) => order(a) - order(b));
  const next = new Map<string, AuditEntry[]>();
  for (const w of byTime) if (w.ifMatch) next.set(w.ifMatch, [...(next.get(w.ifMatch) ?? []), w]);
  const placed = new Set<AuditEntry>();
  const chained: AuditEntry[] = [];
  for (const start of byTime.filter((w) => w.ifNoneMatch === '*')) {
    for (let cur: AuditEntry | undefined = start; cur && !placed.has(cur);) {
      placed.add(cur);
      chained.push(cur);
      cur = cur.etag ? next.get(cur.etag)?.find((w) => !placed.has(w)) : undefined;
    }
  }
  const rest = byTime.filter((w) => !placed.has(w));
  // Merge by time, keeping the chain's own order.
  const merged: AuditEntry[] = [];
  let i = 0;
  for (const w of chained) {
    while (i < rest.length && order(rest[i] as AuditEntry) < order(w)) merged.push(rest[i++] as AuditEntry);
    merged.push(w);
  }
  return [...merged, ...rest.slice(i)];
}

const SAMPLED = 10;

function sample(items: readonly number[], total = items.length): string {
  return total <= SAMPLED ? items.join(', ') : `${items.slice(0, SAMPLED).join(', ')} … (${total})`;
}
