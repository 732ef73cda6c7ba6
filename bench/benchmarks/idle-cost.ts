import { loadavg } from 'node:os';
import { setTimeout as sleep } from 'node:timers/promises';
import { startLagMs } from '../../src/hub/run-record';
import { DEFAULT_CLUSTER } from '../../src/local/cluster';
import { createBlobServiceClient } from '../../src/storage/client-factory';
import { BenchCluster, type BenchInstance } from '../lib/bench-cluster';
import { percentile, printableGoalRatio, tickGrid } from '../lib/failover-trials';
import { report, type BenchOptions, type BenchResult } from '../lib/report';

/**
 * idle-cost: what an idle hub keeps executing, as Flex Consumption bills it (GB-s while an
 * invocation runs). A local cluster of three real instance processes ticking every second, with
 * one one-item job due every minute at second 0, runs for a window; each instance's local host
 * sums how long its coordinator invocations took (its timer, and tick messages on the work
 * queue; one under way counts with the time it has run so far, so a term open across an end of
 * the window counts only its part inside), and the figure is their sum over all instances as a
 * share of the window's wall time,
 * with coordinator invocation-seconds per hour beside it. Two scenarios, each on a fresh cluster:
 * - resting: the app's default (`BATON_REST_WHEN_IDLE`): the leader returns once nothing is open
 *   or due, leaving the lease resting until the next occurrence;
 * - held: `BATON_REST_WHEN_IDLE=false`, the behaviour before: a leader holds its invocation open
 *   for each 60 s term, one after another (a diagnostic, over a shorter window).
 * The start lag of the job's runs in the resting window is reported beside it: resting must not
 * make runs late.
 *
 * The floor is the least a follower's tick can cost: one read of the lease blob with the plain
 * SDK, timed in this process, once a second per instance over the window. The goal is absolute
 * (the issue's: ≤ 3 % of wall time), written as a ratio to the floor.
 */
export const name = 'idle-cost';

const INSTANCES = 3;
/** A smoke run's cluster: a leader and one follower. */
const SMOKE_INSTANCES = 2;
const TICK = DEFAULT_CLUSTER.coordinatorSchedule;
const TICK_MS = tickGrid(TICK).periodMs;
const GOAL_SHARE = 0.03;
const VERBOSE = process.env.BENCH_VERBOSE === '1';

interface Scenario {
  name: 'resting' | 'held';
  what: string;
  restWhenIdle: boolean;
}

interface ScenarioResult {
  name: Scenario['name'];
  what: string;
  windowMs: number;
  /** Coordinator invocations in the window, summed over the instances. */
  invocations: number;
  invocationMs: number;
  share: number;
  invocationSecondsPerHour: number;
  /** Storage requests per tick per instance over the window (the idle budget is 2). */
  requestsPerTickPerInstance: number;
  /** Terms begun in the window, over all instances. */
  terms: number;
  startLagMs: number[];
  perInstance: Array<{ name: string; invocations: number; ms: number }>;
}

/**
 * The instance's coordinator invocations and their time so far (those under way included), at its
 * first report at or after `at`: the instances report once a second, so both ends of the window
 * are read about as late.
 */
function coordinatorTimeAt(instance: BenchInstance, at: number): { count: number; ms: number } {
  const report = instance.events.find((e) => e.kind === 'invocations' && e.at >= at);
  if (report?.kind !== 'invocations') throw new Error(`${instance.name} has not reported its invocations since ${at}`);
  return report.coordinator;
}

async function measure(
  scenario: Scenario,
  windowMs: number,
  job: { name: string; schedule: string },
  trigger: boolean,
  instances: number,
) {
  const cluster = await BenchCluster.start({
    instances,
    hub: `idle-${scenario.name}`,
    jobs: [{ ...job, items: 1 }],
    coordinatorSchedule: TICK,
    restWhenIdle: scenario.restWhenIdle,
  });
  try {
    // Up, elected once, and each instance reporting: the window starts on a whole second.
    await cluster.waitFor(() => cluster.acquiredSince(0), 60_000, 'a first leader');
    await cluster.waitFor(
      () => (cluster.instances.every((i) => i.events.some((e) => e.kind === 'invocations')) ? true : undefined),
      60_000,
      'every instance reporting its invocations',
    );
    // The steady state: the first leader holds on while the next occurrence is less than the
    // shortest rest away (a start-up cost, not an idle one), so the window starts once the lease
    // has rested; held, once the first term has had its idle turns.
    if (scenario.restWhenIdle) {
      const deadline = Date.now() + 120_000;
      while (!(await cluster.readLease()).restingUntil) {
        if (Date.now() > deadline) throw new Error(`the lease did not rest within 120 s\n${cluster.dump()}`);
        await sleep(250);
      }
    } else await sleep(3000);
    const start = Math.ceil(Date.now() / 1000) * 1000;
    await sleep(start - Date.now());
    const requestsBefore = cluster.totalRequests().total;
    const termsBefore = cluster.instances
      .flatMap((i) => i.events)
      .filter((e) => e.kind === 'leader' && e.type === 'acquired').length;
    // A trigger a third of the way in: it must wake the resting hub, and its run is billed too.
    if (trigger) {
      await sleep(windowMs / 3);
      const runId = await cluster.trigger(job.name);
      await cluster.waitForRun(runId, 60_000);
    }
    await sleep(Math.max(0, start + windowMs - Date.now()));
    // The instances report once a second: wait for reports from after the window's end.
    await cluster.freshRequestReports(start + windowMs + 100);
    const before = cluster.instances.map((i) => coordinatorTimeAt(i, start));
    const after = cluster.instances.map((i) => coordinatorTimeAt(i, start + windowMs));
    const perInstance = cluster.instances.map((instance, i) => ({
      name: instance.name,
      invocations: after[i]!.count - before[i]!.count,
      ms: after[i]!.ms - before[i]!.ms,
    }));
    const invocationMs = perInstance.reduce((a, i) => a + i.ms, 0);
    const ticks = windowMs / TICK_MS;
    const runs = (await cluster.runsOf(job.name)).filter(
      (r) => r.occurrence !== null && Date.parse(r.occurrence) >= start && Date.parse(r.occurrence) < start + windowMs,
    );
    const result: ScenarioResult = {
      name: scenario.name,
      what: scenario.what,
      windowMs,
      invocations: perInstance.reduce((a, i) => a + i.invocations, 0),
      invocationMs,
      share: invocationMs / windowMs,
      invocationSecondsPerHour: (invocationMs / 1000) * (3_600_000 / windowMs),
      requestsPerTickPerInstance: (cluster.totalRequests().total - requestsBefore) / ticks / instances,
      terms:
        cluster.instances.flatMap((i) => i.events).filter((e) => e.kind === 'leader' && e.type === 'acquired').length -
        termsBefore,
      startLagMs: runs.map((r) => startLagMs(r) ?? Number.NaN),
      perInstance,
    };
    return { result, cluster };
  } catch (err) {
    await cluster.stop();
    throw err;
  }
}

/** `n` reads of the hub's lease blob with the plain SDK, 100 ms apart, each timed. */
async function timeLeaseReads(cluster: BenchCluster, n: number): Promise<number[]> {
  const blob = createBlobServiceClient({ kind: 'connectionString', connectionString: cluster.connectionString })
    .getContainerClient('leases')
    .getBlobClient(cluster.hub);
  const times: number[] = [];
  for (let i = 0; i < n; i++) {
    const at = performance.now();
    await blob.getProperties();
    times.push(performance.now() - at);
    await sleep(100);
  }
  return times;
}

export async function run(options: BenchOptions = {}): Promise<BenchResult> {
  const smoke = options.smoke === true;
  // A smoke run checks the mechanism: a yearly job (the leader rests the longest rest at once)
  // and a trigger that must wake it. A full run has a run every minute in its window.
  const windowMs = smoke ? 6_000 : Number(process.env.BENCH_IDLE_COST_SECONDS ?? 300) * 1000;
  const instances = smoke ? SMOKE_INSTANCES : INSTANCES;
  const heldWindowMs = smoke ? 0 : Math.min(windowMs, 60_000);
  const job = { name: 'minutely', schedule: smoke ? '0 0 0 1 1 *' : '0 * * * * *' };
  const started = performance.now();
  const loadAtStart = loadavg();

  const resting = await measure(
    { name: 'resting', what: 'the app default: an idle leader rests the lease between occurrences', restWhenIdle: true },
    windowMs,
    job,
    smoke,
    instances,
  );
  // The floor, on the same Azurite and the same lease blob, right after the window.
  const readsMs = await timeLeaseReads(resting.cluster, smoke ? 5 : 60);
  await resting.cluster.stop();
  const floorReadMs = percentile(readsMs, 50);
  const floorMs = floorReadMs * (windowMs / TICK_MS) * instances;
  const results = [resting.result];
  if (heldWindowMs > 0) {
    const held = await measure(
      { name: 'held', what: 'BATON_REST_WHEN_IDLE=false: an idle leader holds each 60 s term', restWhenIdle: false },
      heldWindowMs,
      job,
      false,
      instances,
    );
    await held.cluster.stop();
    results.push(held.result);
  }
  for (const r of results) {
    if (VERBOSE || !smoke) {
      console.error(
        `  ${r.name}: ${r.invocations} coordinator invocations, ${(r.invocationMs / 1000).toFixed(2)} s in ${r.windowMs / 1000} s ` +
          `(${(r.share * 100).toFixed(2)} % of wall, ${r.invocationSecondsPerHour.toFixed(0)} s/h); ${r.terms} terms; ` +
          `${r.requestsPerTickPerInstance.toFixed(2)} requests/tick/instance; start lags ${JSON.stringify(r.startLagMs)} ms`,
      );
    }
  }
  const ours = resting.result.invocationMs;
  const lags = resting.result.startLagMs;
  return report(
    name,
    {
      samples: { scenarios: results, floorReadsMs: readsMs },
      summary: {
        what: 'coordinator invocation time (its timer and tick messages), summed over every instance, in a window of an idle hub whose one job is due every minute; as a share of wall time and as invocation-seconds per hour',
        headline: `resting: ${(resting.result.share * 100).toFixed(2)} % of wall time (${resting.result.invocationSecondsPerHour.toFixed(0)} invocation-seconds per hour) against a floor of one lease read per tick per instance`,
        cluster: `${instances} real instance processes on one in-process Azurite, a coordinator tick every ${TICK_MS} ms; a fresh cluster per scenario`,
        job: smoke
          ? 'one one-item job due once a year, and one trigger a third of the way into the window (the wake)'
          : 'one one-item job due every minute at second 0',
        windowSeconds: windowMs / 1000,
        scenarios: results.map(({ perInstance: _, ...rest }) => rest),
        startLag: lags.length > 0 ? { n: lags.length, p50: percentile(lags, 50), max: Math.max(...lags) } : null,
        floor: {
          what: 'one read of the lease blob with the plain SDK (getProperties), timed in this process on the same Azurite after the window: a follower tick’s least cost, once a tick per instance',
          readP50Ms: floorReadMs,
          windowMs: floorMs,
        },
        goal: `coordinator invocation-seconds ≤ ${GOAL_SHARE * 100} % of wall time, summed over all instances`,
        goalMet: resting.result.share <= GOAL_SHARE,
        measuredOn:
          'the local cluster only: a Functions host adds its own invocation overhead, and Flex bills per instance memory while any invocation runs',
        loadAverage: { start: loadAtStart, end: loadavg() },
        wallSeconds: (performance.now() - started) / 1000,
      },
      ours,
      floor: floorMs,
      unit: 'ms',
      goal: { ratio: printableGoalRatio((GOAL_SHARE * windowMs) / floorMs), direction: 'atMost' },
    },
    options,
  );
}
