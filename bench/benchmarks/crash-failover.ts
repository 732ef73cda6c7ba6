import { loadavg } from 'node:os';
import { DEFAULT_CLUSTER } from '../../src/local/cluster';
import { BenchCluster, type BenchInstance } from '../lib/bench-cluster';
import {
  ALIGNMENT_MARGIN_MS,
  lastLeaderEvent,
  PERCENTILE_METHOD,
  phaseOf,
  printableGoalRatio,
  renewalDues,
  renewalIntervals,
  renewalsOf,
  round,
  sleepUntil,
  stats,
  stratifiedOffsets,
  tickAtOrAfter,
  tickAtOrBefore,
  tickGrid,
  waitForReady,
  type Ready,
  type Renewal,
} from '../lib/failover-trials';
import { report, type BenchOptions, type BenchResult } from '../lib/report';

/**
 * crash-failover: kill -9 the leading instance of a local cluster (three real instance
 * processes, one in-process Azurite, the local cluster's default coordinator schedule) and time
 * until another instance's leader task runs (its `acquired` event, emitted just before the
 * task). Ten trials back to back on one cluster; after each, a replacement instance is started so
 * there are three again, and the next trial waits until every instance has ticked at least once.
 *
 * The floor is the lease duration: after a crash storage gives a blob lease to nobody until it
 * expires, so an election that waits for expiry cannot do better than the lease after the
 * holder's last renewal. Baton does not wait (crash takeover, `BATON_TAKEOVER_MS`, 3 s by
 * default): the leader beats every 750 ms, and a follower that finds the lease blob unwritten for
 * 3 s breaks the lease at that ETag and leads. Ours is the p95 of the kill → acquired delays;
 * goal p95 ≤ 5 s, a third of the floor.
 *
 * Where the kill falls in the leader's renewal cycle decides how much of the lease is left, so
 * the kills are spread over the real cycle: each trial waits for a `renewed` event of the leader
 * (it carries the renewal's latency, so its start is known), then kills at an offset after it,
 * one per tenth of the time until the next renewal is due (with a margin at both ends), random
 * within its tenth, shuffled. The next renewal is not simply 5 s later: with the followers
 * ticking on a fixed grid, the leader times each renewal (`expiryAlignment`, at most half an
 * interval early) so that its lease would expire 300 ms before a tick; the benchmark applies the
 * same rule to know when it is due. On the 1 s grid that rule gives 5 s, or 4 s when the target
 * lands a hair before the aligned instant (see `renewalDues`): kills past the 4 s point are used
 * only in a cycle where the leader did not renew there, and none fall within the margin of it.
 *
 * Each trial reports the lease expiry (the start of the victim's last renewal + the lease) and
 * the time from it to the new leader's task: what Baton adds above the floor (the alignment
 * margin, then the followers' lease read, acquire and epoch bump).
 */
export const name = 'crash-failover';

const LEASE_SECONDS = 15;
const LEASE_MS = LEASE_SECONDS * 1000;
/** The elector's default: a third of the lease. */
const RENEW_MS = LEASE_MS / 3;
/** The app's default term (`BATON_TERM_SECONDS`): a kill this close to its end could meet a release instead. */
const TERM_MS = 60_000;
const TERM_GUARD_MS = 1000;
/** The local cluster's default schedule (every second), the one `baton start` runs. */
const SCHEDULE = DEFAULT_CLUSTER.coordinatorSchedule;
const GRID = tickGrid(SCHEDULE);
const INSTANCES = 3;
/** A smoke run's cluster: the leader to kill and one follower to take over. */
const SMOKE_INSTANCES = 2;
/** Kills are kept this far from both renewals of their cycle, so the last renewal before the kill is known. */
const RENEW_MARGIN_MS = 150;
/** Renewals of one term watched after the trials, for the renewal intervals. */
const OBSERVED_RENEWALS = 6;
/** Trials redone (a term that ended at the kill) before giving up. */
const MAX_REDOS = 5;
const VERBOSE = process.env.BENCH_VERBOSE === '1';

interface Sample {
  trial: number;
  victim: string;
  successor: string;
  oldEpoch: number;
  newEpoch: number;
  /** Kill (SIGKILL sent) → the successor's `acquired` event, ms. */
  delayMs: number;
  /** How long the victim had led when killed. */
  victimLedMs: number;
  /**
   * Whether the victim had renewed in this term before the kill. When not, its lease is the
   * first one (acquire + lease, not aligned to the tick grid), and the expiry is estimated from
   * its `acquired` event.
   */
  victimRenewed: boolean;
  /** Renewals of this term before the kill. */
  renewalsBeforeKill: number;
  /** The last renewal's round trip (its `latencyMs`); null if it had not renewed. */
  lastRenewalLatencyMs: number | null;
  /** Time since the start of the victim's last renewal (or its `acquired` event) at the kill. */
  sinceRenewalMs: number;
  /** Kill → the earliest the victim's next renewal could have started (by the alignment rule): ≥ the margin. */
  nextRenewalDueMs: number | null;
  /** Kill → lease expiry (last renewal start + lease): the floor for this trial. */
  toExpiryMs: number;
  /** Expiry → acquired (delay − toExpiry): what Baton added above this trial's floor. */
  afterExpiryMs: number;
  /** The expiry's place in the followers' tick cycle (ms after a tick); period − 300 when aligned. */
  expiryTickPhaseMs: number;
  /** Expiry → the tick on which the successor acquired (the last tick instant before its `acquired` event). */
  tickWaitMs: number;
  /** Whether that tick was the first at or after the expiry. */
  firstTickAfterExpiry: boolean;
  /** That tick → `acquired`: the timer firing, the lease read, the acquire, the epoch bump. */
  acquireMs: number;
  /** The kill's place in the tick cycle. */
  killTickPhaseMs: number;
}

interface Plan {
  renewal: Renewal;
  /** When the next renewal may start (one instant, or two when the cycle may be short or long). */
  dues: number[];
  killAt: number;
}

const LEASE_TIMING = { leaseMs: LEASE_MS, renewMs: RENEW_MS };
/** Issue 52's goal: a new leader within 5 s of a crash at p95. */
const GOAL_MS = 5000;
/** The app's default `BATON_TAKEOVER_MS`: the silence after which a follower breaks the lease. */
const TAKEOVER_MS = 3000;

/** The cycle(s) the alignment rule gives after an aligned renewal on this grid, in words. */
const CYCLE_NOTE = ((): string => {
  const start = Math.ceil(1e12 / GRID.periodMs) * GRID.periodMs + GRID.offsetMs - LEASE_MS - ALIGNMENT_MARGIN_MS;
  const cycles = renewalDues(start, LEASE_TIMING, GRID).map((d) => `${Math.round((d - start) / 100) / 10} s`);
  return cycles.length > 1
    ? `either ${cycles[1]} or ${cycles[0]} (${cycles[0]} when the plain target lands a hair before the aligned instant: the rule then pulls it back by almost a whole tick)`
    : (cycles[0] as string);
})();

/**
 * Where kills may fall after a renewal: from RENEW_MARGIN_MS after it completed to
 * RENEW_MARGIN_MS before the last instant the next one may start, leaving out RENEW_MARGIN_MS
 * either side of an earlier instant it may start at.
 */
function killSpans(renewal: Renewal, dues: readonly number[]): [number, number][] {
  const spans: [number, number][] = [];
  let from = renewal.at + RENEW_MARGIN_MS;
  for (const due of dues) {
    if (due - RENEW_MARGIN_MS > from) spans.push([from, due - RENEW_MARGIN_MS]);
    from = Math.max(from, due + RENEW_MARGIN_MS);
  }
  return spans;
}

/** The point at fraction `u` of the spans' total length. */
function pointIn(spans: readonly [number, number][], u: number): number {
  let left = u * spans.reduce((sum, [a, b]) => sum + (b - a), 0);
  for (const [a, b] of spans) {
    if (left <= b - a) return a + left;
    left -= b - a;
  }
  return (spans[spans.length - 1] as [number, number])[1];
}

/** The leader's term is still the one `ready` saw. */
function sameTerm(cluster: BenchCluster, ready: Ready): boolean {
  return cluster.leader() === ready.leader && lastLeaderEvent(ready.leader, 'acquired') === ready.acquiredAt;
}

/**
 * The kill instant for fraction `u` of the cycle after the leader's latest renewal, once that
 * instant is still ahead; undefined until such a renewal has been reported.
 */
function planKill(ready: Ready, u: number): Plan | undefined {
  const renewals = renewalsOf(ready.leader, ready.epoch);
  const renewal = renewals[renewals.length - 1];
  if (!renewal) return undefined;
  const dues = renewalDues(renewal.start, LEASE_TIMING, GRID);
  const killAt = pointIn(killSpans(renewal, dues), u);
  return killAt >= Date.now() + 20 ? { renewal, dues, killAt } : undefined;
}

/**
 * Waits for a renewal of the current leader, then until the trial's point in the cycle after it.
 * When the cycle may be short or long, a point past the short one's renewal is only used if the
 * leader did not renew there; if it did, the trial aims again from that renewal.
 */
async function aimKill(cluster: BenchCluster, instances: number, u: number): Promise<{ ready: Ready; plan: Plan }> {
  for (;;) {
    const ready = await waitForReady(cluster, instances, 60_000);
    const plan = await cluster.waitFor(
      () => (sameTerm(cluster, ready) ? planKill(ready, u) : null),
      RENEW_MS * 3,
      `a renewal by ${ready.leader.name}`,
    );
    // A term ends after TERM_MS (then it is released, not crashed): aim in the next one.
    if (!plan || plan.killAt > ready.acquiredAt + TERM_MS - TERM_GUARD_MS) {
      await cluster.waitFor(() => (sameTerm(cluster, ready) ? undefined : true), TERM_MS + 30_000, 'the next term');
      continue;
    }
    await sleepUntil(plan.killAt);
    const latest = renewalsOf(ready.leader, ready.epoch).pop();
    if (sameTerm(cluster, ready) && latest?.at === plan.renewal.at) return { ready, plan };
  }
}

/** The victim's term ended on its own (released or lost) before the kill: not a crash. */
function endedBeforeKill(victim: BenchInstance, epoch: number, t0: number): boolean {
  return victim.events.some(
    (e) => e.kind === 'leader' && (e.type === 'released' || e.type === 'lost') && e.epoch === epoch && e.at <= t0,
  );
}

export async function run(options: BenchOptions = {}): Promise<BenchResult> {
  const trials = options.smoke ? 1 : Number(process.env.BENCH_FAILOVER_TRIALS ?? 10);
  const instances = options.smoke ? SMOKE_INSTANCES : INSTANCES;
  const started = performance.now();
  const loadAtStart = loadavg();
  const fractions = stratifiedOffsets(trials, 0, 1);
  const samples: Sample[] = [];
  let redone = 0;
  let intervals: number[] = [];
  const cluster = await BenchCluster.start({ instances, leaseSeconds: LEASE_SECONDS, coordinatorSchedule: SCHEDULE });
  try {
    for (let trial = 1; trial <= trials; trial++) {
      const u = fractions[trial - 1] as number;
      const { ready, plan } = await aimKill(cluster, instances, u);
      const victim = ready.leader;
      const t0 = Date.now();
      victim.proc.kill('SIGKILL');
      const next = await cluster.waitFor(
        () => cluster.acquiredSince(t0, victim),
        LEASE_MS + 15_000,
        `a new leader after killing ${victim.name}`,
      );
      await victim.exited;
      cluster.spawn();
      if (endedBeforeKill(victim, ready.epoch, t0)) {
        if (++redone > MAX_REDOS) throw new Error(`${redone} kills met a term that had already ended`);
        trial--;
        continue;
      }
      // Every line the victim wrote before the kill has been read by now (the successor took
      // over ≥ 10 s later): its real last renewal, not the one aimed from.
      const before = renewalsOf(victim, ready.epoch).filter((r) => r.at <= t0);
      const last = before[before.length - 1];
      const leaseStart = last ? last.start : ready.acquiredAt;
      const expiry = leaseStart + LEASE_MS;
      const delayMs = next.at - t0;
      const toExpiryMs = expiry - t0;
      const acquiredTick = tickAtOrBefore(GRID, next.at);
      const sample: Sample = {
        trial,
        victim: victim.name,
        successor: next.instance.name,
        oldEpoch: ready.epoch,
        newEpoch: next.epoch,
        delayMs,
        victimLedMs: t0 - ready.acquiredAt,
        victimRenewed: last !== undefined,
        renewalsBeforeKill: before.length,
        lastRenewalLatencyMs: last ? last.latencyMs : null,
        sinceRenewalMs: round(t0 - leaseStart),
        nextRenewalDueMs: last
          ? round(Math.min(...renewalDues(last.start, LEASE_TIMING, GRID).filter((d) => d > t0 - RENEW_MARGIN_MS)) - t0)
          : null,
        toExpiryMs: round(toExpiryMs),
        afterExpiryMs: round(delayMs - toExpiryMs),
        expiryTickPhaseMs: round(phaseOf(expiry - GRID.offsetMs, GRID.periodMs)),
        tickWaitMs: round(acquiredTick - expiry),
        firstTickAfterExpiry: acquiredTick === tickAtOrAfter(GRID, expiry),
        acquireMs: next.at - acquiredTick,
        killTickPhaseMs: phaseOf(t0 - GRID.offsetMs, GRID.periodMs),
      };
      samples.push(sample);
      if (VERBOSE)
        console.error(
          `  trial ${trial} (aimed ${round(plan.killAt - plan.renewal.at)} ms after a renewal): ${JSON.stringify(sample)}`,
        );
    }
    // The cycle itself: let the last leader renew a few times (every victim was killed after one).
    if (!options.smoke) {
      const ready = await waitForReady(cluster, instances, 60_000);
      await cluster.waitFor(
        () => (!sameTerm(cluster, ready) || renewalsOf(ready.leader, ready.epoch).length >= OBSERVED_RENEWALS ? true : undefined),
        OBSERVED_RENEWALS * RENEW_MS + 15_000,
        `${OBSERVED_RENEWALS} renewals by ${ready.leader.name}`,
      );
    }
    intervals = renewalIntervals(cluster.instances);
  } finally {
    await cluster.stop();
  }

  const delays = stats(samples.map((s) => s.delayMs));
  const renewed = samples.filter((s) => s.victimRenewed);
  const afterExpiry = stats(samples.map((s) => s.afterExpiryMs));
  const ours = delays.p95;
  const goalRatio = GOAL_MS / LEASE_MS;
  const summary = {
    what: 'SIGKILL to the leading instance → the first `acquired` event of another instance (emitted just before its leader task runs), on one machine clock',
    cluster: `${instances} real instance processes (dist/src/local/instance-main.js), one in-process Azurite in memory; a replacement started after each trial`,
    trials,
    leaseSeconds: LEASE_SECONDS,
    renewIntervalMs: RENEW_MS,
    coordinatorSchedule: `${SCHEDULE} (the local cluster's default, DEFAULT_CLUSTER.coordinatorSchedule): a tick every ${GRID.periodMs} ms`,
    expiryAlignment: `on, as the app sets it for a fixed-grid schedule: period ${GRID.periodMs} ms, offset ${GRID.offsetMs} ms, margin ${ALIGNMENT_MARGIN_MS} ms (each renewal at most ${RENEW_MS / 2} ms early, timed so the lease would expire ${ALIGNMENT_MARGIN_MS} ms before a tick); the first lease of a term (acquire + lease) is not aligned`,
    delayMs: delays,
    percentiles: PERCENTILE_METHOD,
    perTrial: samples.map((s) => ({
      delayMs: s.delayMs,
      afterExpiryMs: s.afterExpiryMs,
      victimRenewed: s.victimRenewed,
      sinceRenewalMs: s.sinceRenewalMs,
    })),
    floor: `the lease duration (${LEASE_MS} ms): after a crash storage gives the lease to nobody until it expires, ${LEASE_SECONDS} s after the holder's last renewal; that is the best any lease-based election can do`,
    killPhase: `each trial waits for a \`renewed\` event of the leader and kills at a point of the time from it to the next renewal due (by the alignment rule), kept ${RENEW_MARGIN_MS} ms from both: one per 1/${trials} of that span, random within it, shuffled. On this grid the next renewal starts ${CYCLE_NOTE} after the last one started, so the span leaves out ${RENEW_MARGIN_MS} ms either side of every instant it may start at, and a point past the earlier one is used only when the leader did not renew there (otherwise the trial aims again from that renewal). So the lease left at the kill (toExpiryMs) spans about ${LEASE_MS - RENEW_MS}–${LEASE_MS} ms, and a delay below the lease is expected, not a sign of an early takeover`,
    victimsRenewed: `${renewed.length} of ${samples.length} victims had renewed in their term before the kill${renewed.length < samples.length ? '; the others were killed on their first lease (victimRenewed false: expiry estimated from the acquired event, late by the epoch bump)' : ''}`,
    renewalIntervalsMs: {
      note: `start-to-start intervals between consecutive renewals of one term, every leader of the run (from their renewed events; each victim renewed about once, so most come from the last leader, watched for ${OBSERVED_RENEWALS} renewals after the trials). The alignment rule gives ${CYCLE_NOTE}`,
      ...stats(intervals.map(round)),
    },
    afterExpiryMs: afterExpiry,
    afterExpiryNote: `delay minus the time from the kill to lease expiry: what Baton adds above each trial's floor. The expiry is the start of the victim's real last renewal before the kill (its renewed event's at − latencyMs) + the lease; storage restarts the lease somewhere within that request, so the true expiry is later by at most its latency (a few ms) and afterExpiry is overstated by as much. An aligned renewal puts the expiry ${ALIGNMENT_MARGIN_MS} ms before a tick (expiryTickPhaseMs ≈ ${GRID.periodMs - ALIGNMENT_MARGIN_MS}), so the followers' next tick finds the lease expired: afterExpiry ≈ ${ALIGNMENT_MARGIN_MS} ms + the read, acquire and epoch bump (acquireMs)`,
    expiryTickPhaseMs: stats(renewed.map((s) => s.expiryTickPhaseMs)),
    tickWaitMs: stats(samples.map((s) => s.tickWaitMs)),
    acquireMs: stats(samples.map((s) => s.acquireMs)),
    tookFirstTickAfterExpiry: `${samples.filter((s) => s.firstTickAfterExpiry).length} of ${samples.length}`,
    redoneTrials: `${redone} kill(s) met a term that had already ended (released) and were redone`,
    takeover: `crash takeover on, as the app defaults it (BATON_TAKEOVER_MS ${TAKEOVER_MS}): the leader beats every ${TAKEOVER_MS / 4} ms (one Set Blob Properties), and a follower whose reads find the lease blob's ETag unchanged for ${TAKEOVER_MS} ms (by two of its reads, or by storage's Date against Last-Modified, to the second) breaks the lease at that ETag and acquires. So the lease left at the kill (toExpiryMs) no longer bounds the delay: afterExpiryMs is negative when the takeover beat the expiry`,
    boundBy: `the victim's last beat (up to ${TAKEOVER_MS / 4} ms before the kill), then ${TAKEOVER_MS} ms of silence as the followers read it: their first read after the last beat starts the count by their own clock, or storage's Last-Modified shows it (to the second, so up to 1 s is lost), then the next tick (every ${GRID.periodMs} ms here) that reaches ${TAKEOVER_MS} ms breaks the lease and acquires with the next epoch. About ${TAKEOVER_MS} + one or two ticks − the beat's age. On Azure, where a timer runs on one instance at a time every 10 s by default, the wake is that tick or the tick beacon (hidden ${5 + TAKEOVER_MS / 1000 + 1} s after each renewal): not measured here`,
    goal: `p95 ≤ ${GOAL_MS} ms, i.e. ratio p95/lease ≤ ${goalRatio.toFixed(4)} (exactly ${GOAL_MS}/${LEASE_MS}; the result's goal.ratio is rounded up to 4 decimals)`,
    loadAverage: {
      note: '1/5/15-min load averages of the machine (2 cores), shared with whatever else ran meanwhile',
      start: loadAtStart,
      end: loadavg(),
    },
    wallSeconds: (performance.now() - started) / 1000,
  };
  return report(
    name,
    {
      samples,
      summary,
      ours,
      floor: LEASE_MS,
      unit: 'ms',
      goal: { ratio: printableGoalRatio(goalRatio), direction: 'atMost' },
    },
    options,
  );
}
