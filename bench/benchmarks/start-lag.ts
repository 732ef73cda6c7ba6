import { loadavg } from 'node:os';
import { setTimeout as sleep } from 'node:timers/promises';
import { FencedDocuments } from '../../src/fencing/fenced-documents';
import { jobStateKey, type JobState } from '../../src/hub/job-state';
import { firstItemLagMs, isTerminal, startLagMs, type RunRecord } from '../../src/hub/run-record';
import { DEFAULT_CLUSTER } from '../../src/local/cluster';
import { Schedule } from '../../src/schedule/schedule';
import type { SyntheticJobSpec } from '../../functions/synthetic-job';
import { DRAIN_RULE, DRAIN_WAIT_MS, HOST_KILL_AFTER_MS, type InstanceStopKind } from '../../src/local/stop-rules';
import { readRunDetails, type RunDetails } from '../../src/hub/status';
import { BenchCluster, type BenchInstance } from '../lib/bench-cluster';
import { inexactness } from '../lib/synthetic-runs';
import { lagStats, percentile, printableGoalRatio, tickGrid, type LagStats } from '../lib/failover-trials';
import { sideBySide } from '../lib/side-by-side';
import { formatLine, report, type BenchOptions, type BenchResult, type Goal } from '../lib/report';

/**
 * start-lag: how late scheduled runs start, as a user feels it: for every occurrence, due (the
 * schedule) → run record created (`startLagMs`) and → first item counted (`firstItemLagMs`), both
 * by storage's clock (here Azurite's, in this process: the machine's). A local cluster of three
 * real instance processes ticking every second runs five short jobs, each due every 5 s at its
 * own second (one occurrence a second in all, so runs of one job never overlap), through eight
 * scenarios, each on a fresh cluster. The instances are stopped as the Functions host stops a
 * worker (`src/local/stop-rules.ts`: each killed 5 s after it was asked):
 * - steady: nothing happens;
 * - steady-blocking: nothing happens, but a sixth job's items each hold their instance's event
 *   loop for 1 s (a synchronous busy loop, `blockMs`), the leader's among them;
 * - hook: the host's WorkerTerminate to the leader every 10 s (its appTerminate hook runs; a
 *   replacement starts at once): make-before-break;
 * - sigterm: a bare SIGTERM to the leader every 10 s (no hook: Baton's signal handler), the same;
 * - sigkill: the leader is killed with SIGKILL every 35 s (a replacement starts at once): nothing
 *   runs, and the lease is left to the successor's takeover;
 * - rolling: a deploy from version 1 to 2, instance by instance (a v2 instance starts, then a v1
 *   one gets WorkerTerminate), three instances over the window;
 * - drain: the leader put in drain mode every 10 s (invocations it started up to 3 s before are
 *   aborted 1 to 3 s in; then a bare SIGTERM), a replacement started at once;
 * - frozen: every instance's timers off (`BATON_LOCAL_FREEZE_TIMERS`) and 8 s terms: only tick
 *   messages move leadership.
 * Per scenario: p50, p99 and max of both lags over the occurrences due in its window, the
 * occurrences that did not run (skipped or missed, with the job state's reasons), duplicates (an
 * occurrence with more than one run, or a run for no occurrence of the schedule), whether every
 * run that started ended with the exact output, and the leader changes (terms begun) in it.
 *
 * The floor is a bare timer's own lateness, measured in the same run: a timeout in this process
 * aimed at each whole second of the steady window; its lateness is when the callback ran minus
 * the second it was aimed at. Each goal is absolute (the issue's), written as a
 * ratio to the floor's p99.
 */
export const name = 'start-lag';

const INSTANCES = 3;
const JOBS = 5;
const PERIOD_S = 5;
const LEASE_SECONDS = 15;
const TICK = DEFAULT_CLUSTER.coordinatorSchedule;
const TICK_MS = tickGrid(TICK).periodMs;
const VERBOSE = process.env.BENCH_VERBOSE === '1';

/** Job k is due at seconds k, k+5, …, 55+k of every minute. */
const JOB_SPECS: SyntheticJobSpec[] = Array.from({ length: JOBS }, (_, k) => ({
  name: `lag-${k}`,
  schedule: `${k}-59/${PERIOD_S} * * * * *`,
  items: 4,
}));

/**
 * steady-blocking's sixth job: four items every 10 s, each a 1 s busy loop: four seconds in every
 * ten in which some instance's event loop is held, the leader's whenever its worker takes one.
 * A run's four seconds of work end well within its 10 s period, so its runs never overlap.
 */
const BLOCKING_JOB: SyntheticJobSpec = { name: 'lag-block', schedule: '3-59/10 * * * * *', items: 4, blockMs: 1000 };

/**
 * How long, once a window has settled, its runs may still take to end: a message that an
 * instance held when it was stopped comes back only after the local visibility timeout (30 s).
 */
const RUN_END_MS = 90_000;

type ScenarioName = 'steady' | 'steady-blocking' | 'hook' | 'sigterm' | 'sigkill' | 'rolling' | 'drain' | 'frozen';

interface Scenario {
  name: ScenarioName;
  what: string;
  env?: Record<string, string>;
  /** Jobs its cluster runs beside the measured ones (tallied like them). */
  jobs?: SyntheticJobSpec[];
  /**
   * Disrupts the cluster during the window [start, end); returns how many times. The stops it
   * started may still be under way: it leaves each one's end in `stops`.
   */
  disrupt?: (cluster: BenchCluster, start: number, end: number, stops: Promise<void>[]) => Promise<number>;
  /** How long after the window runs may still be created (a late start is still a start). */
  settleMs: number;
}

interface Occurrence {
  job: string;
  occurrence: string;
  startLagMs: number | null;
  firstItemLagMs: number | null;
  /** Not run: what the job state says about it. */
  outcome?: string;
  reason?: string;
}

interface ScenarioResult {
  name: ScenarioName;
  what: string;
  windowMs: number;
  disruptions: number;
  due: number;
  started: number;
  notRun: { skipped: number; missed: number; unrecorded: number };
  duplicates: number;
  /** Of the runs of the window's occurrences: ended with the exact output, ended otherwise, not ended. */
  runs: { exact: number; inexact: number; unended: number };
  /** Why each inexact run is so, one line a reason. */
  inexact: { runId: string; reasons: string[] }[];
  startLagMs: LagStats;
  firstItemLagMs: LagStats;
  /** Terms begun in the window (`acquired` events on any instance): each a leadership change. */
  leaderChanges: number;
  /**
   * Takeovers in the window, as the events that make them: a leader that lost its lease, or a
   * candidate that broke one (`lost`, `broke`; a takeover of a live leader makes one of each).
   */
  takeovers: number;
  occurrences: Occurrence[];
}

/** Until `at` (ms since epoch), or at once if it has passed. */
async function until(at: number): Promise<void> {
  const left = at - Date.now();
  if (left > 0) await sleep(left);
}

/** With BENCH_VERBOSE=1, how a stopped instance went: its `stop` event, and how its process ended. */
function exitLog(cluster: BenchCluster, instance: BenchInstance, kind: InstanceStopKind, struck: number, start: number): void {
  if (!VERBOSE) return;
  const stop = cluster.stopOf(instance);
  const drained = instance.events.find((e) => e.kind === 'drained' && e.at >= struck);
  console.error(
    `  ${instance.name} (${kind} at +${struck - start} ms) exited after ${Date.now() - struck} ms, ${JSON.stringify(instance.exit)}` +
      (drained ? `, drained after ${drained.at - struck} ms` : '') +
      (stop
        ? `; stop ${stop.path} ${stop.lease} after ${stop.at - struck} ms (durationMs ${stop.durationMs})`
        : '; no stop event'),
  );
}

/**
 * Stops the leader as the host would (`kind`) every `everyMs` in the window, a replacement spawned
 * at once each time. A leader already being stopped (a drained one leads on until its SIGTERM) is
 * not struck again: the strike waits for one that is not.
 */
function strikeLeader(kind: InstanceStopKind, everyMs: number) {
  return async (cluster: BenchCluster, start: number, end: number, stops: Promise<void>[]): Promise<number> => {
    const stopping = new Set<BenchInstance>();
    let strikes = 0;
    // The first strike half-way into the first period, or into the window when it is shorter.
    for (let at = start + Math.min(everyMs, end - start) / 2; at < end; at += everyMs) {
      await until(at);
      const leader = await cluster.waitFor(
        () => {
          const found = cluster.leader();
          return found && !stopping.has(found) ? found : undefined;
        },
        LEASE_SECONDS * 1000 + 30_000,
        'a leader to strike',
      );
      stopping.add(leader);
      const struck = Date.now();
      stops.push(cluster.stopInstance(leader, kind).then(() => exitLog(cluster, leader, kind, struck, start)));
      cluster.spawn();
      strikes++;
      if (VERBOSE) console.error(`  ${kind} to ${leader.name} at +${Date.now() - start} ms`);
    }
    return strikes;
  };
}

/** Version 1 to 2, one instance at a time: a v2 instance starts, then the oldest v1 gets WorkerTerminate. */
async function rollingDeploy(cluster: BenchCluster, start: number, end: number, stops: Promise<void>[]): Promise<number> {
  const olds = cluster.instances.filter((i) => i.alive);
  const step = (end - start) / (olds.length + 1);
  let replaced = 0;
  for (const [k, old] of olds.entries()) {
    await until(start + step * (k + 0.5));
    const fresh = cluster.spawn({ BATON_APP_VERSION: '2.0.0' });
    await cluster.waitFor(
      () => (fresh.events.some((e) => e.kind === 'started') ? true : undefined),
      60_000,
      `${fresh.name} started`,
    );
    const struck = Date.now();
    stops.push(cluster.stopInstance(old, 'terminate').then(() => exitLog(cluster, old, 'terminate', struck, start)));
    replaced++;
    if (VERBOSE) console.error(`  rolling: ${fresh.name} (v2) up, WorkerTerminate to ${old.name} at +${Date.now() - start} ms`);
  }
  return replaced;
}

const SCENARIOS: Scenario[] = [
  { name: 'steady', what: 'no disruption', settleMs: 5_000 },
  {
    name: 'steady-blocking',
    what: `no disruption; a sixth job (${BLOCKING_JOB.name}, ${BLOCKING_JOB.items} items every 10 s) whose items each hold their instance's event loop for ${BLOCKING_JOB.blockMs} ms (a synchronous busy loop)`,
    jobs: [BLOCKING_JOB],
    settleMs: 5_000,
  },
  {
    name: 'hook',
    what: "the host's WorkerTerminate to the leader every 10 s (its appTerminate hook runs), a replacement started at once (make-before-break handover)",
    disrupt: strikeLeader('terminate', 10_000),
    settleMs: 5_000,
  },
  {
    name: 'sigterm',
    what: "a bare SIGTERM to the leader every 10 s (no hook: Baton's signal handler), a replacement started at once (make-before-break handover)",
    disrupt: strikeLeader('sigterm', 10_000),
    settleMs: 5_000,
  },
  {
    name: 'sigkill',
    what: `SIGKILL to the leader every 35 s, a replacement started at once (nothing runs; its ${LEASE_SECONDS} s lease is left to the takeover)`,
    disrupt: strikeLeader('sigkill', 35_000),
    settleMs: LEASE_SECONDS * 1000 + 10_000,
  },
  {
    name: 'rolling',
    what: 'a rolling deploy from version 1 to 2: each of the three instances replaced in turn (v2 started, then WorkerTerminate to a v1)',
    env: { BATON_APP_VERSION: '1.0.0' },
    disrupt: rollingDeploy,
    settleMs: 5_000,
  },
  {
    name: 'drain',
    what: 'the leader put in drain mode every 10 s (invocations it started up to 3 s before aborted 1 to 3 s in; a bare SIGTERM once drained, or after 10 s), a replacement started at once',
    disrupt: strikeLeader('drain', 10_000),
    // A drained leader leads on until its SIGTERM, up to 10 s after the drain: a late start is still a start.
    settleMs: DRAIN_WAIT_MS + 5_000,
  },
  {
    name: 'frozen',
    what: 'every instance with its timers off and 8 s terms: leadership moves by tick messages only',
    env: { BATON_LOCAL_FREEZE_TIMERS: '1', BATON_TERM_SECONDS: '8' },
    settleMs: 10_000,
  },
];

/** The occurrences of `spec` in [start, end). */
function dueIn(spec: SyntheticJobSpec, start: number, end: number): string[] {
  const schedule = Schedule.parse(spec.schedule!, `${spec.name}.schedule`);
  const found: string[] = [];
  for (let next = schedule.next(new Date(start - 1)); next && next.getTime() < end; next = schedule.next(next)) {
    found.push(next.toISOString());
  }
  return found;
}

/** A scenario to run on a cluster, and what runs beside its window (the floor, in steady's). */
interface Planned {
  scenario: Scenario;
  duringWindow?: (start: number, end: number) => Promise<unknown>;
}

/**
 * The scenarios one after another on one cluster (a full run gives each its own: one scenario
 * per call), each in a window of its own; runs created up to `settleMs` after the last window
 * still count. Every window is tallied once the last has settled and its stops are done; a full
 * run waits up to `RUN_END_MS` more for each run of its windows to end.
 */
async function measureScenarios(
  planned: readonly Planned[],
  cluster: { hub: string; instances: number; jobs: readonly SyntheticJobSpec[]; env?: Record<string, string> },
  timing: {
    windowMs: number;
    settleMs: number;
    /** How long after the last settle every run of the windows may take to end (0: not waited for). */
    runEndMs: number;
    /** Whether the last window's stops are waited for (a smoke leaves them to the cluster's stop). */
    waitForStops: boolean;
  },
): Promise<ScenarioResult[]> {
  const { windowMs, settleMs, runEndMs } = timing;
  const shared = planned.length > 1;
  const bench = await BenchCluster.start({
    instances: cluster.instances,
    hub: cluster.hub,
    jobs: [...cluster.jobs],
    coordinatorSchedule: TICK,
    leaseSeconds: LEASE_SECONDS,
    // The app's default; with an occurrence every second its leader never rests.
    restWhenIdle: true,
    ...(cluster.env ? { env: cluster.env } : {}),
  });
  try {
    await bench.waitFor(() => bench.leader(), 60_000, 'a leader');
    // Warm: one run of any job created and ended, so every instance's queues and clients are up.
    const warmFrom = Date.now();
    await bench.waitFor(
      () => (bench.instances.some((i) => i.events.some((e) => e.kind === 'worked' && e.at >= warmFrom)) ? true : undefined),
      60_000,
      'a first run worked',
    );
    const windows: { scenario: Scenario; start: number; end: number; disruptions: number }[] = [];
    const stops: Promise<void>[] = [];
    for (const [k, { scenario, duringWindow }] of planned.entries()) {
      const last = k === planned.length - 1;
      const previous = windows.at(-1);
      // After a disruption, the cluster is whole again (a stopped leader has exited) first.
      if (previous) {
        await bench.waitFor(
          () => (bench.instances.filter((i) => i.alive).length === cluster.instances ? true : undefined),
          60_000,
          `${cluster.instances} live instances`,
        );
      }
      // The window starts on a whole second, just before an occurrence: right after the last
      // window when that has only just ended.
      const start =
        previous && Date.now() < previous.end + 50 ? previous.end : Math.ceil((Date.now() + 1000) / 1000) * 1000 - 100;
      const end = start + windowMs;
      const beside = duringWindow?.(start, end);
      const disruptions = scenario.disrupt ? await scenario.disrupt(bench, start, end, stops) : 0;
      await beside;
      // Only the last window needs the settle: the ones before it settle during those after.
      await until(last ? end + settleMs : end);
      windows.push({ scenario, start, end, disruptions });
    }
    // Every stopped instance has exited: a drained one up to 10 s after its drain, then killed 5 s
    // after its SIGTERM at the latest. The windows' runs are checked once no stop is under way.
    if (timing.waitForStops) await Promise.all(stops);
    else for (const stop of stops) stop.catch(() => undefined);
    const runsEndBy = Date.now() + runEndMs;
    const results: ScenarioResult[] = [];
    for (const w of windows) {
      const inWindow = bench.instances.flatMap((i) => i.events).filter((e) => e.at >= w.start && e.at < w.end);
      const changes = inWindow.filter((e) => e.kind === 'leader' && e.type === 'acquired').length;
      // A term that ends at its length and is taken again is no takeover; a lost lease or a
      // broken one is.
      const takeovers = inWindow.filter((e) => e.kind === 'leader' && (e.type === 'lost' || e.type === 'broke')).length;
      results.push(
        await tally(bench, cluster.jobs, w.scenario, w.start, w.end, w.disruptions, changes, runsEndBy, shared, takeovers),
      );
    }
    return results;
  } finally {
    await bench.stop();
  }
}

/** The run's details once it has ended, or undefined if it has not by `by` (ms since epoch). */
async function whenEnded(cluster: BenchCluster, runId: string, by: number): Promise<RunDetails | undefined> {
  for (;;) {
    const details = await readRunDetails(cluster.docs, runId).catch(() => undefined);
    if (details && isTerminal(details.record.state)) return details;
    if (Date.now() >= by) return undefined;
    await sleep(250);
  }
}

async function tally(
  cluster: BenchCluster,
  jobs: readonly SyntheticJobSpec[],
  scenario: Scenario,
  start: number,
  end: number,
  disruptions: number,
  leaderChanges: number,
  /** Until when a run of the window may still end (ms since epoch). */
  runsEndBy: number,
  /** Duplicates among this window's occurrences only: other windows ran on the same cluster. */
  windowOnly = false,
  takeovers = 0,
): Promise<ScenarioResult> {
  const states = new FencedDocuments<JobState>(cluster.docs);
  const occurrences: Occurrence[] = [];
  const runs = { exact: 0, inexact: 0, unended: 0 };
  const inexact: { runId: string; reasons: string[] }[] = [];
  let duplicates = 0;
  for (const spec of jobs) {
    const due = dueIn(spec, start, end);
    const records = (await cluster.runsOf(spec.name)).filter(
      (r): r is RunRecord & { occurrence: string } => r.occurrence !== null,
    );
    const byOccurrence = new Map<string, RunRecord[]>();
    for (const run of records) byOccurrence.set(run.occurrence, [...(byOccurrence.get(run.occurrence) ?? []), run]);
    const schedule = new Set(dueIn(spec, start - 3_600_000, end + 3_600_000));
    const inWindow = new Set(due);
    for (const [occurrence, list] of byOccurrence) {
      if (windowOnly && schedule.has(occurrence) && !inWindow.has(occurrence)) continue;
      if (list.length > 1) duplicates += list.length - 1;
      if (!schedule.has(occurrence)) duplicates += list.length;
    }
    const recent = (await states.read(jobStateKey(spec.name)).catch(() => undefined))?.value.recent ?? [];
    for (const occurrence of due) {
      const run = byOccurrence.get(occurrence)?.[0];
      if (run) {
        occurrences.push({ job: spec.name, occurrence, startLagMs: startLagMs(run), firstItemLagMs: firstItemLagMs(run) });
        // Started once is not enough: it must end, and fold every item exactly once.
        const details = await whenEnded(cluster, run.runId, runsEndBy);
        const reasons = details ? inexactness(spec, details) : [];
        if (!details) runs.unended++;
        else if (reasons.length > 0) {
          runs.inexact++;
          inexact.push({ runId: run.runId, reasons });
        } else runs.exact++;
        continue;
      }
      const event = recent.find((e) => e.occurrence === occurrence && e.outcome !== 'started');
      occurrences.push({
        job: spec.name,
        occurrence,
        startLagMs: null,
        firstItemLagMs: null,
        outcome: event?.outcome ?? 'unrecorded',
        ...(event?.reason ? { reason: event.reason } : {}),
      });
    }
  }
  occurrences.sort((a, b) => a.occurrence.localeCompare(b.occurrence));
  const present = (values: (number | null)[]) => values.filter((v): v is number => v !== null);
  const notRun = occurrences.filter((o) => o.startLagMs === null);
  return {
    name: scenario.name,
    what: scenario.what,
    windowMs: end - start,
    disruptions,
    due: occurrences.length,
    started: occurrences.length - notRun.length,
    notRun: {
      skipped: notRun.filter((o) => o.outcome === 'skipped').length,
      missed: notRun.filter((o) => o.outcome === 'missed').length,
      unrecorded: notRun.filter((o) => o.outcome === 'unrecorded').length,
    },
    duplicates,
    runs,
    inexact,
    startLagMs: lagStats(present(occurrences.map((o) => o.startLagMs))),
    firstItemLagMs: lagStats(present(occurrences.map((o) => o.firstItemLagMs))),
    leaderChanges,
    takeovers,
    occurrences,
  };
}

/**
 * A bare timer's lateness over [start, end): a timeout in this process aimed at each whole second,
 * as a scheduler's timer is aimed at an occurrence; how long after that second its callback ran.
 */
async function timerFloor(start: number, end: number): Promise<number[]> {
  const lateness: number[] = [];
  // Sub-millisecond: Date.now() would round a timer that fires on time down to a floor of 0.
  const now = () => performance.timeOrigin + performance.now();
  for (let due = Math.ceil(start / 1000) * 1000; due < end; due += 1000) {
    await new Promise<void>((resolve) => setTimeout(resolve, Math.max(0, due - now())));
    lateness.push(Math.round((now() - due) * 1000) / 1000);
  }
  return lateness;
}

interface GoalSpec {
  name: string;
  measure: string;
  scenario: ScenarioName;
  figure: 'p99' | 'max';
  limitMs: number;
  /** At most this share of the occurrences due may go without a run (none by default). */
  notRunShare?: number;
  /** No term may begin in the window: whoever led at its start leads throughout. */
  noTakeover?: boolean;
}

/**
 * What every goal holds besides its figure, in every scenario: no run started twice, and every
 * run that started ended with the exact output (none lost, none counted twice).
 */
const EVERY_RUN = 'no run twice, every run ended and exact';

/**
 * The issue's goals: p99 ≤ 1 s in every scenario but SIGKILL, where the max is ≤ 6 s and at most
 * 1 occurrence in 10 goes without a run; steady (with and without a blocking job) p99 ≤ 250 ms
 * and no takeover (a lease lost or broken; a term that ends at its length and is taken again is none). The maxima of steady (≤ 1 s), and of SIGTERM and rolling (≤ 2 s) stay
 * from before, the SIGTERM one now for both the hook and the bare signal.
 */
const GOALS: GoalSpec[] = [
  {
    name: 'steady-p99',
    measure: `steady, p99 start lag ≤ 250 ms, no takeover, 0 not run, ${EVERY_RUN}`,
    scenario: 'steady',
    figure: 'p99',
    limitMs: 250,
    noTakeover: true,
  },
  {
    name: 'steady-max',
    measure: `steady, max start lag ≤ 1 s, 0 not run, ${EVERY_RUN}`,
    scenario: 'steady',
    figure: 'max',
    limitMs: 1000,
  },
  {
    name: 'steady-blocking-p99',
    measure: `steady with items blocking the event loop, p99 start lag ≤ 250 ms, no takeover, 0 not run, ${EVERY_RUN}`,
    scenario: 'steady-blocking',
    figure: 'p99',
    limitMs: 250,
    noTakeover: true,
  },
  {
    name: 'hook-p99',
    measure: `WorkerTerminates, p99 start lag ≤ 1 s, 0 not run, ${EVERY_RUN}`,
    scenario: 'hook',
    figure: 'p99',
    limitMs: 1000,
  },
  {
    name: 'hook-max',
    measure: `WorkerTerminates, max start lag ≤ 2 s, 0 not run, ${EVERY_RUN}`,
    scenario: 'hook',
    figure: 'max',
    limitMs: 2000,
  },
  {
    name: 'sigterm-p99',
    measure: `bare SIGTERMs, p99 start lag ≤ 1 s, 0 not run, ${EVERY_RUN}`,
    scenario: 'sigterm',
    figure: 'p99',
    limitMs: 1000,
  },
  {
    name: 'sigterm-max',
    measure: `bare SIGTERMs, max start lag ≤ 2 s, 0 not run, ${EVERY_RUN}`,
    scenario: 'sigterm',
    figure: 'max',
    limitMs: 2000,
  },
  {
    name: 'sigkill-max',
    measure: `SIGKILLs, max start lag ≤ 6 s, at most 1 in 10 not run, ${EVERY_RUN}`,
    scenario: 'sigkill',
    figure: 'max',
    limitMs: 6000,
    notRunShare: 0.1,
  },
  {
    name: 'rolling-p99',
    measure: `rolling deploy, p99 start lag ≤ 1 s, 0 not run, ${EVERY_RUN}`,
    scenario: 'rolling',
    figure: 'p99',
    limitMs: 1000,
  },
  {
    name: 'rolling-max',
    measure: `rolling deploy, max start lag ≤ 2 s, 0 not run, ${EVERY_RUN}`,
    scenario: 'rolling',
    figure: 'max',
    limitMs: 2000,
  },
  {
    name: 'drain-p99',
    measure: `drains, p99 start lag ≤ 1 s, 0 not run, ${EVERY_RUN}`,
    scenario: 'drain',
    figure: 'p99',
    limitMs: 1000,
  },
  {
    name: 'frozen-p99',
    measure: `frozen timers, p99 start lag ≤ one coordinator period and ≤ 1 s (${Math.min(TICK_MS, 1000)} ms), 0 not run, ${EVERY_RUN}`,
    scenario: 'frozen',
    figure: 'p99',
    limitMs: Math.min(TICK_MS, 1000),
  },
];

/**
 * The smoke run's clusters: steady, rolling and drain one after another on one cluster (started
 * as version 1, for the rolling deploy, whose old instances get WorkerTerminate; the drain ends in
 * a bare SIGTERM), and frozen, whose every instance has its timers off, on a cluster of its own
 * beside it. Two instances each: a leader and one to take over.
 */
const SMOKE_INSTANCES = 2;
/**
 * And two of the jobs, due at seconds 0 and 2 of every 5: two occurrences in each window. Most of
 * a smoke run's work is its runs (a third of a CPU second each), one every second with them all.
 */
const SMOKE_JOBS = JOB_SPECS.filter((_, k) => k === 0 || k === 2);
const SMOKE_GROUPS: { hub: string; scenarios: ScenarioName[] }[] = [
  { hub: 'lag-smoke', scenarios: ['steady', 'rolling', 'drain'] },
  { hub: 'lag-smoke-frozen', scenarios: ['frozen'] },
];

export async function run(options: BenchOptions = {}): Promise<BenchResult> {
  const smoke = options.smoke === true;
  // A smoke run checks that the scenarios work: a few occurrences each (one of each job), one
  // disruption, both of the host's stops that let an instance shut down (a WorkerTerminate in the
  // rolling deploy, the drain's SIGTERM). It leaves out sigkill, whose window must outlast a
  // takeover (the crash-failover smoke kills a leader); hook and sigterm, whose strikes are the
  // drain's with another stop (graceful-handover's smoke stops a leader both ways); and
  // steady-blocking, whose busy items would take a core from the rest of the suite.
  const windowMs = smoke ? 5_000 : Number(process.env.BENCH_START_LAG_SECONDS ?? 100) * 1000;
  const smoked = new Set(SMOKE_GROUPS.flatMap((g) => g.scenarios));
  // BENCH_START_LAG_SCENARIOS picks scenarios (comma-separated); steady always runs, as the floor is timed in its window.
  const picked = process.env.BENCH_START_LAG_SCENARIOS?.split(',').map((n) => n.trim());
  for (const n of picked ?? [])
    if (!SCENARIOS.some((s) => s.name === n)) throw new Error(`BENCH_START_LAG_SCENARIOS: no scenario ${n}`);
  const scenarios = smoke
    ? SCENARIOS.filter((s) => smoked.has(s.name))
    : SCENARIOS.filter((s) => !picked || s.name === 'steady' || picked.includes(s.name));
  const started = performance.now();
  const loadAtStart = loadavg();
  let floorLateness: number[] = [];
  // The floor is measured during the steady window, so both see the same machine.
  const floor = async (start: number, end: number) => (floorLateness = await timerFloor(start, end));
  const plan = (scenario: Scenario): Planned => ({ scenario, ...(scenario.name === 'steady' ? { duringWindow: floor } : {}) });
  const print = (result: ScenarioResult): void => {
    if (!VERBOSE && smoke) return;
    console.error(
      `  ${result.name}: start lag p50 ${result.startLagMs.p50} p99 ${result.startLagMs.p99} max ${result.startLagMs.max} ms; ` +
        `first item p99 ${result.firstItemLagMs.p99} ms; ${result.started}/${result.due} started, not run ${JSON.stringify(result.notRun)}, ` +
        `${result.duplicates} duplicate; runs ${JSON.stringify(result.runs)}; ${result.disruptions} disruptions, ${result.leaderChanges} leader changes, ${result.takeovers} leases lost or broken` +
        (result.inexact.length > 0 ? `\n    inexact: ${JSON.stringify(result.inexact)}` : ''),
    );
  };
  const results: ScenarioResult[] = [];
  if (smoke) {
    // A smoke run only checks that runs are counted, not how late the last ones start: with two
    // jobs its last occurrence is due at least 0.9 s before the last window ends. Nor does it wait
    // for runs to end: those that have are checked.
    const groups = await sideBySide(
      SMOKE_GROUPS.map(({ hub, scenarios: names }) => () => {
        const group = names.map((n) => scenarios.find((s) => s.name === n) as Scenario);
        const last = group.at(-1) as Scenario;
        const env = Object.assign({}, ...group.map((s) => s.env ?? {})) as Record<string, string>;
        const jobs = [...SMOKE_JOBS, ...group.flatMap((s) => s.jobs ?? [])];
        return measureScenarios(
          group.map(plan),
          { hub, instances: SMOKE_INSTANCES, jobs, env },
          // A drained leader in the last window leads on for 10 s before its SIGTERM, after the
          // window; the cluster's stop (SIGINT) ends it instead.
          { windowMs, settleMs: Math.min(last.settleMs, 2000), runEndMs: 0, waitForStops: false },
        );
      }),
    );
    const byName = new Map(groups.flat().map((r) => [r.name, r]));
    for (const scenario of scenarios) results.push(byName.get(scenario.name) as ScenarioResult);
    results.forEach(print);
  } else {
    for (const scenario of scenarios) {
      const cluster = {
        hub: `lag-${scenario.name}`,
        instances: INSTANCES,
        jobs: [...JOB_SPECS, ...(scenario.jobs ?? [])],
        ...(scenario.env ? { env: scenario.env } : {}),
      };
      const [result] = await measureScenarios([plan(scenario)], cluster, {
        windowMs,
        settleMs: scenario.settleMs,
        runEndMs: RUN_END_MS,
        waitForStops: true,
      });
      results.push(result as ScenarioResult);
      print(result as ScenarioResult);
    }
  }
  const floorP99 = percentile(floorLateness, 99);
  const byName = new Map(results.map((r) => [r.name, r]));
  const goals = GOALS.filter((g) => byName.has(g.scenario)).map((g) => {
    const r = byName.get(g.scenario)!;
    const ours = r.startLagMs[g.figure];
    const notRun = r.due - r.started;
    const notRunAllowed = Math.floor((g.notRunShare ?? 0) * r.due);
    const counts =
      notRun <= notRunAllowed &&
      r.duplicates === 0 &&
      r.runs.inexact === 0 &&
      r.runs.unended === 0 &&
      (!g.noTakeover || r.takeovers === 0);
    const goal: Goal = { ratio: printableGoalRatio(g.limitMs / floorP99), direction: 'atMost' };
    return {
      name: g.name,
      measure: g.measure,
      ours,
      floor: floorP99,
      unit: 'ms',
      goal,
      limitMs: g.limitMs,
      notRun,
      notRunAllowed,
      duplicates: r.duplicates,
      runs: r.runs,
      ...(g.noTakeover ? { leaderChanges: r.leaderChanges, takeovers: r.takeovers } : {}),
      result: ours <= g.limitMs && counts ? 'met' : 'missed',
    };
  });
  const steady = byName.get('steady')!;
  const extraJobs = SCENARIOS.filter((s) => s.jobs && byName.has(s.name));
  const result = report(
    name,
    {
      samples: { scenarios: results.map((r) => ({ name: r.name, occurrences: r.occurrences })), floorLatenessMs: floorLateness },
      summary: {
        what: 'start lag: an occurrence (due, by the schedule) → its run record created, by storage’s clock; first-item lag: → the first item counted. Per scenario, over every occurrence due in its window; and whether each run of them ended with its exact output',
        headline: 'steady p99 start lag against the p99 of a bare timer’s lateness; every scenario’s goal is in `goals`',
        stops: `as the Functions host stops a worker (src/local/stop-rules.ts): WorkerTerminate runs the appTerminate hook, a bare SIGTERM none (Baton's own handler runs), drain mode aborts invocations started up to ${DRAIN_RULE.nearMs / 1000} s before it and is followed by a bare SIGTERM (at most ${DRAIN_WAIT_MS / 1000} s later); each killed ${HOST_KILL_AFTER_MS / 1000} s after the host asked`,
        cluster: smoke
          ? `${SMOKE_INSTANCES} real instance processes per cluster on one in-process Azurite each, a coordinator tick every ${TICK_MS} ms, ${LEASE_SECONDS} s lease; ${SMOKE_GROUPS[0]!.scenarios.join(', ')} one after another on one cluster (smoke), ${SMOKE_GROUPS[1]!.scenarios.join(', ')} on its own beside it`
          : `${INSTANCES} real instance processes on one in-process Azurite, a coordinator tick every ${TICK_MS} ms, ${LEASE_SECONDS} s lease; a fresh cluster per scenario`,
        jobs:
          (smoke
            ? `${SMOKE_JOBS.length} synthetic jobs of 4 items, each due every ${PERIOD_S} s at its own second (${SMOKE_JOBS.map((j) => j.schedule).join(', ')}: smoke)`
            : `${JOBS} synthetic jobs of 4 items, each due every ${PERIOD_S} s at its own second (one occurrence a second in all)`) +
          extraJobs.map((s) => `; ${s.name} adds ${s.jobs!.map((j) => `${j.name} (${JSON.stringify(j)})`).join(', ')}`).join(''),
        windowSeconds: windowMs / 1000,
        runEnd: smoke
          ? 'smoke: runs not ended when the windows are tallied are counted unended, not waited for'
          : `every run of a window's occurrences is waited for up to ${RUN_END_MS / 1000} s after the window settled, then checked: succeeded, every item counted once, the closed-form output (bench/lib/synthetic-runs.ts)`,
        scenarios: results.map(({ occurrences: _, ...rest }) => rest),
        floor: {
          what: 'a bare timer’s own lateness: a timeout in the benchmark process aimed at each whole second of the steady window; when its callback ran minus the second it was aimed at',
          n: floorLateness.length,
          p50: percentile(floorLateness, 50),
          p99: floorP99,
          max: floorLateness.length ? Math.max(...floorLateness) : Number.NaN,
        },
        goals,
        goalsNote:
          'each goal is absolute: its ratio is limit/floor (rounded up to 4 decimals), met exactly when the figure is within the limit; `result` is met only when the counts in its measure hold as well',
        percentiles: 'nearest rank, no interpolation',
        loadAverage: { start: loadAtStart, end: loadavg() },
        wallSeconds: (performance.now() - started) / 1000,
      },
      ours: steady.startLagMs.p99,
      floor: floorP99,
      unit: 'ms',
      goal: goals[0]!.goal,
    },
    options,
  );
  for (const g of goals)
    console.log(`${formatLine({ ...g, name: `${name}.${g.name}` })}${g.result === 'missed' ? ' (limit or count missed)' : ''}`);
  return result;
}
