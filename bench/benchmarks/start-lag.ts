import { loadavg } from 'node:os';
import { setTimeout as sleep } from 'node:timers/promises';
import { FencedDocuments } from '../../src/fencing/fenced-documents';
import { jobStateKey, type JobState } from '../../src/hub/job-state';
import { firstItemLagMs, startLagMs, type RunRecord } from '../../src/hub/run-record';
import { DEFAULT_CLUSTER } from '../../src/local/cluster';
import { Schedule } from '../../src/schedule/schedule';
import type { SyntheticJobSpec } from '../../functions/synthetic-job';
import { BenchCluster } from '../lib/bench-cluster';
import { percentile, printableGoalRatio, tickGrid } from '../lib/failover-trials';
import { sideBySide } from '../lib/side-by-side';
import { formatLine, report, type BenchOptions, type BenchResult, type Goal } from '../lib/report';

/**
 * start-lag: how late scheduled runs start, as a user feels it: for every occurrence, due (the
 * schedule) → run record created (`startLagMs`) and → first item counted (`firstItemLagMs`), both
 * by storage's clock (here Azurite's, in this process: the machine's). A local cluster of three
 * real instance processes ticking every second runs five short jobs, each due every 5 s at its
 * own second (one occurrence a second in all, so runs of one job never overlap), through five
 * scenarios, each on a fresh cluster:
 * - steady: nothing happens;
 * - sigterm: the leader gets SIGTERM every 10 s (a replacement starts at once): make-before-break;
 * - sigkill: the leader is killed with SIGKILL every 35 s (a replacement starts at once): its
 *   lease has to expire first;
 * - rolling: a deploy from version 1 to 2, instance by instance (a v2 instance starts, then a v1
 *   one gets SIGTERM), three instances over the window;
 * - frozen: every instance's timers off (`BATON_LOCAL_FREEZE_TIMERS`) and 8 s terms: only tick
 *   messages move leadership.
 * Per scenario: p50, p99 and max of both lags over the occurrences due in its window, the
 * occurrences that did not run (skipped or missed, with the job state's reasons) and duplicates
 * (an occurrence with more than one run, or a run for no occurrence of the schedule).
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

type ScenarioName = 'steady' | 'sigterm' | 'sigkill' | 'rolling' | 'frozen';

interface Scenario {
  name: ScenarioName;
  what: string;
  env?: Record<string, string>;
  /** Disrupts the cluster during the window [start, end). */
  disrupt?: (cluster: BenchCluster, start: number, end: number) => Promise<number>;
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
  startLagMs: LagStats;
  firstItemLagMs: LagStats;
  leaderChanges: number;
  occurrences: Occurrence[];
}

interface LagStats {
  n: number;
  p50: number;
  p99: number;
  max: number;
}

function lagStats(values: readonly number[]): LagStats {
  return {
    n: values.length,
    p50: percentile(values, 50),
    p99: percentile(values, 99),
    max: values.length ? Math.max(...values) : Number.NaN,
  };
}

/** Until `at` (ms since epoch), or at once if it has passed. */
async function until(at: number): Promise<void> {
  const left = at - Date.now();
  if (left > 0) await sleep(left);
}

/** Sends `signal` to the leader every `everyMs` in the window, a replacement (`env`) spawned at once each time. */
function strikeLeader(signal: NodeJS.Signals, everyMs: number) {
  return async (cluster: BenchCluster, start: number, end: number): Promise<number> => {
    let strikes = 0;
    // The first strike half-way into the first period, or into the window when it is shorter.
    for (let at = start + Math.min(everyMs, end - start) / 2; at < end; at += everyMs) {
      await until(at);
      const leader = await cluster.waitFor(() => cluster.leader(), LEASE_SECONDS * 1000 + 30_000, 'a leader to strike');
      leader.proc.kill(signal);
      cluster.spawn();
      strikes++;
      if (VERBOSE) console.error(`  ${signal} to ${leader.name} at +${Date.now() - start} ms`);
    }
    return strikes;
  };
}

/** Version 1 to 2, one instance at a time: a v2 instance starts, then the oldest v1 gets SIGTERM. */
async function rollingDeploy(cluster: BenchCluster, start: number, end: number): Promise<number> {
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
    old.proc.kill('SIGTERM');
    replaced++;
    if (VERBOSE) console.error(`  rolling: ${fresh.name} (v2) up, SIGTERM to ${old.name} at +${Date.now() - start} ms`);
  }
  return replaced;
}

const SCENARIOS: Scenario[] = [
  { name: 'steady', what: 'no disruption', settleMs: 5_000 },
  {
    name: 'sigterm',
    what: 'SIGTERM to the leader every 10 s, a replacement started at once (make-before-break handover)',
    disrupt: strikeLeader('SIGTERM', 10_000),
    settleMs: 5_000,
  },
  {
    name: 'sigkill',
    what: `SIGKILL to the leader every 35 s, a replacement started at once (its ${LEASE_SECONDS} s lease expires first)`,
    disrupt: strikeLeader('SIGKILL', 35_000),
    settleMs: LEASE_SECONDS * 1000 + 10_000,
  },
  {
    name: 'rolling',
    what: 'a rolling deploy from version 1 to 2: each of the three instances replaced in turn (v2 started, then SIGTERM to a v1)',
    env: { BATON_APP_VERSION: '1.0.0' },
    disrupt: rollingDeploy,
    settleMs: 5_000,
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
 * still count. Every window is tallied once the last has settled.
 */
async function measureScenarios(
  planned: readonly Planned[],
  cluster: { hub: string; instances: number; jobs: readonly SyntheticJobSpec[]; env?: Record<string, string> },
  windowMs: number,
  settleMs: number,
): Promise<ScenarioResult[]> {
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
    const windows: { scenario: Scenario; start: number; end: number; disruptions: number; changes: number }[] = [];
    for (const [k, { scenario, duringWindow }] of planned.entries()) {
      const last = k === planned.length - 1;
      const previous = windows.at(-1);
      // After a disruption, the cluster is whole again (a SIGTERMed leader has exited) first.
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
      const changesBefore = (await bench.readLease()).epoch;
      const beside = duringWindow?.(start, end);
      const disruptions = scenario.disrupt ? await scenario.disrupt(bench, start, end) : 0;
      await beside;
      // Only the last window needs the settle: the ones before it settle during those after.
      await until(last ? end + settleMs : end);
      const changes = (await bench.readLease()).epoch - changesBefore;
      windows.push({ scenario, start, end, disruptions, changes });
    }
    const results: ScenarioResult[] = [];
    for (const w of windows) {
      results.push(await tally(bench, cluster.jobs, w.scenario, w.start, w.end, w.disruptions, w.changes, shared));
    }
    return results;
  } finally {
    await bench.stop();
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
  /** Duplicates among this window's occurrences only: other windows ran on the same cluster. */
  windowOnly = false,
): Promise<ScenarioResult> {
  const states = new FencedDocuments<JobState>(cluster.docs);
  const occurrences: Occurrence[] = [];
  let duplicates = 0;
  for (const spec of jobs) {
    const due = dueIn(spec, start, end);
    const runs = (await cluster.runsOf(spec.name)).filter((r): r is RunRecord & { occurrence: string } => r.occurrence !== null);
    const byOccurrence = new Map<string, RunRecord[]>();
    for (const run of runs) byOccurrence.set(run.occurrence, [...(byOccurrence.get(run.occurrence) ?? []), run]);
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
    startLagMs: lagStats(present(occurrences.map((o) => o.startLagMs))),
    firstItemLagMs: lagStats(present(occurrences.map((o) => o.firstItemLagMs))),
    leaderChanges,
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
  /** Occurrences not run and duplicates must both be 0. */
  exact?: boolean;
}

const GOALS: GoalSpec[] = [
  { name: 'steady-p99', measure: 'steady, p99 start lag ≤ 250 ms', scenario: 'steady', figure: 'p99', limitMs: 250 },
  { name: 'steady-max', measure: 'steady, max start lag ≤ 1 s', scenario: 'steady', figure: 'max', limitMs: 1000 },
  {
    name: 'sigterm-p99',
    measure: 'SIGTERMs, p99 start lag ≤ 1 s, 0 not run, 0 duplicate',
    scenario: 'sigterm',
    figure: 'p99',
    limitMs: 1000,
    exact: true,
  },
  {
    name: 'sigterm-max',
    measure: 'SIGTERMs, max start lag ≤ 2 s',
    scenario: 'sigterm',
    figure: 'max',
    limitMs: 2000,
    exact: true,
  },
  {
    name: 'rolling-p99',
    measure: 'rolling deploy, p99 start lag ≤ 1 s, 0 not run, 0 duplicate',
    scenario: 'rolling',
    figure: 'p99',
    limitMs: 1000,
    exact: true,
  },
  {
    name: 'rolling-max',
    measure: 'rolling deploy, max start lag ≤ 2 s',
    scenario: 'rolling',
    figure: 'max',
    limitMs: 2000,
    exact: true,
  },
  {
    name: 'sigkill-max',
    measure: `SIGKILLs, max start lag ≤ lease + 2 s (${LEASE_SECONDS + 2} s)`,
    scenario: 'sigkill',
    figure: 'max',
    limitMs: (LEASE_SECONDS + 2) * 1000,
  },
  {
    name: 'frozen-p99',
    measure: `frozen timers, p99 start lag ≤ one coordinator period (${TICK_MS} ms)`,
    scenario: 'frozen',
    figure: 'p99',
    limitMs: TICK_MS,
  },
];

/**
 * The smoke run's clusters: steady, sigterm and rolling one after another on one cluster (started
 * as version 1, for the rolling deploy), and frozen, whose every instance has its timers off, on
 * a cluster of its own beside it. Two instances each: a leader and one to take over.
 */
const SMOKE_INSTANCES = 2;
/**
 * And two of the jobs, due at seconds 0 and 2 of every 5: two occurrences in each window. Most of
 * a smoke run's work is its runs (a third of a CPU second each), one every second with them all.
 */
const SMOKE_JOBS = JOB_SPECS.filter((_, k) => k === 0 || k === 2);
const SMOKE_GROUPS: { hub: string; scenarios: ScenarioName[] }[] = [
  { hub: 'lag-smoke', scenarios: ['steady', 'sigterm', 'rolling'] },
  { hub: 'lag-smoke-frozen', scenarios: ['frozen'] },
];

export async function run(options: BenchOptions = {}): Promise<BenchResult> {
  const smoke = options.smoke === true;
  // A smoke run checks that the scenarios work: a few occurrences each (one of each job), one
  // disruption. It leaves out sigkill, whose window must outlast a lease expiry (the
  // crash-failover smoke kills a leader).
  const windowMs = smoke ? 5_000 : Number(process.env.BENCH_START_LAG_SECONDS ?? 100) * 1000;
  const scenarios = smoke ? SCENARIOS.filter((s) => s.name !== 'sigkill') : SCENARIOS;
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
        `${result.duplicates} duplicate, ${result.disruptions} disruptions, ${result.leaderChanges} leader changes`,
    );
  };
  const results: ScenarioResult[] = [];
  if (smoke) {
    // A smoke run only checks that runs are counted, not how late the last ones start: with two
    // jobs its last occurrence is due at least 0.9 s before the last window ends.
    const groups = await sideBySide(
      SMOKE_GROUPS.map(({ hub, scenarios: names }) => () => {
        const group = names.map((n) => scenarios.find((s) => s.name === n) as Scenario);
        const last = group.at(-1) as Scenario;
        const env = Object.assign({}, ...group.map((s) => s.env ?? {})) as Record<string, string>;
        return measureScenarios(
          group.map(plan),
          { hub, instances: SMOKE_INSTANCES, jobs: SMOKE_JOBS, env },
          windowMs,
          Math.min(last.settleMs, 2000),
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
        jobs: JOB_SPECS,
        ...(scenario.env ? { env: scenario.env } : {}),
      };
      const [result] = await measureScenarios([plan(scenario)], cluster, windowMs, scenario.settleMs);
      results.push(result as ScenarioResult);
      print(result as ScenarioResult);
    }
  }
  const floorP99 = percentile(floorLateness, 99);
  const byName = new Map(results.map((r) => [r.name, r]));
  const goals = GOALS.filter((g) => byName.has(g.scenario)).map((g) => {
    const r = byName.get(g.scenario)!;
    const ours = r.startLagMs[g.figure];
    const exact = !g.exact || (r.due - r.started === 0 && r.duplicates === 0);
    const goal: Goal = { ratio: printableGoalRatio(g.limitMs / floorP99), direction: 'atMost' };
    return {
      name: g.name,
      measure: g.measure,
      ours,
      floor: floorP99,
      unit: 'ms',
      goal,
      limitMs: g.limitMs,
      ...(g.exact ? { notRun: r.due - r.started, duplicates: r.duplicates } : {}),
      result: ours <= g.limitMs && exact ? 'met' : 'missed',
    };
  });
  const steady = byName.get('steady')!;
  const result = report(
    name,
    {
      samples: { scenarios: results.map((r) => ({ name: r.name, occurrences: r.occurrences })), floorLatenessMs: floorLateness },
      summary: {
        what: 'start lag: an occurrence (due, by the schedule) → its run record created, by storage’s clock; first-item lag: → the first item counted. Per scenario, over every occurrence due in its window',
        headline: 'steady p99 start lag against the p99 of a bare timer’s lateness; every scenario’s goal is in `goals`',
        cluster: smoke
          ? `${SMOKE_INSTANCES} real instance processes per cluster on one in-process Azurite each, a coordinator tick every ${TICK_MS} ms, ${LEASE_SECONDS} s lease; steady, sigterm and rolling one after another on one cluster (smoke), frozen on its own beside it`
          : `${INSTANCES} real instance processes on one in-process Azurite, a coordinator tick every ${TICK_MS} ms, ${LEASE_SECONDS} s lease; a fresh cluster per scenario`,
        jobs: smoke
          ? `${SMOKE_JOBS.length} synthetic jobs of 4 items, each due every ${PERIOD_S} s at its own second (${SMOKE_JOBS.map((j) => j.schedule).join(', ')}: smoke)`
          : `${JOBS} synthetic jobs of 4 items, each due every ${PERIOD_S} s at its own second (one occurrence a second in all)`,
        windowSeconds: windowMs / 1000,
        scenarios: results.map(({ occurrences: _, ...rest }) => rest),
        floor: {
          what: 'a bare timer’s own lateness: a timeout in the benchmark process aimed at each whole second of the steady window; when its callback ran minus the second it was aimed at',
          n: floorLateness.length,
          p50: percentile(floorLateness, 50),
          p99: floorP99,
          max: floorLateness.length ? Math.max(...floorLateness) : Number.NaN,
        },
        goals,
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
