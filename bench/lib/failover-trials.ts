import { Schedule } from '../../src/schedule/schedule';
import type { BenchCluster, BenchInstance, TimedEvent } from './bench-cluster';

/**
 * Helpers shared by the crash-failover and graceful-handover benchmarks: when the cluster is
 * ready for a trial, when to strike within a cycle (renewal or tick), and the statistics.
 */

/** Nearest-rank percentile (p in 0–100): the smallest sample with at least p % at or below it. */
export function percentile(values: readonly number[], p: number): number {
  if (values.length === 0) return Number.NaN;
  const sorted = [...values].sort((a, b) => a - b);
  const rank = Math.max(1, Math.ceil((p / 100) * sorted.length));
  return sorted[rank - 1] as number;
}

/** A start or first-item lag's spread: p50, p99 and max (NaN for none). */
export interface LagStats {
  n: number;
  p50: number;
  p99: number;
  max: number;
}

export function lagStats(values: readonly number[]): LagStats {
  return {
    n: values.length,
    p50: percentile(values, 50),
    p99: percentile(values, 99),
    max: values.length ? Math.max(...values) : Number.NaN,
  };
}

export interface Stats {
  n: number;
  min: number;
  p50: number;
  p95: number;
  max: number;
  mean: number;
}

export function stats(values: readonly number[]): Stats {
  const sum = values.reduce((a, b) => a + b, 0);
  return {
    n: values.length,
    min: values.length ? Math.min(...values) : Number.NaN,
    p50: percentile(values, 50),
    p95: percentile(values, 95),
    max: values.length ? Math.max(...values) : Number.NaN,
    mean: values.length ? sum / values.length : Number.NaN,
  };
}

export const PERCENTILE_METHOD =
  'nearest rank on the trials (p95 of 10 trials is the largest; p50 the 5th smallest): no interpolation, so p95 is never flattered';

/** `t` modulo `period`, in [0, period). */
export function phaseOf(t: number, period: number): number {
  return ((t % period) + period) % period;
}

/**
 * `n` offsets in [from, to), one drawn uniformly from each of n equal strata, in random order:
 * with only ten trials this covers the whole cycle instead of leaving it to chance.
 */
export function stratifiedOffsets(n: number, from: number, to: number, random: () => number = Math.random): number[] {
  const width = (to - from) / n;
  const offsets = Array.from({ length: n }, (_, i) => from + (i + random()) * width);
  for (let i = offsets.length - 1; i > 0; i--) {
    const j = Math.floor(random() * (i + 1));
    [offsets[i], offsets[j]] = [offsets[j] as number, offsets[i] as number];
  }
  return offsets;
}

/** The first time `base + k·period + offset` (k ≥ 0 whole) at or after `notBefore`. */
export function nextAt(base: number, period: number, offset: number, notBefore: number): number {
  const k = Math.max(0, Math.ceil((notBefore - base - offset) / period));
  return base + k * period + offset;
}

export function sleepUntil(at: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, Math.max(0, at - Date.now())));
}

/** The coordinator schedule's fixed grid: a tick every `periodMs`, at `offsetMs` past each multiple of it (UTC). */
export interface TickGrid {
  periodMs: number;
  offsetMs: number;
}

/** The grid of a fixed-period NCRONTAB schedule (e.g. every second), as the app computes it for `expiryAlignment`. */
export function tickGrid(schedule: string): TickGrid {
  const grid = Schedule.parse(schedule, 'coordinatorSchedule').fixedPeriod();
  if (!grid) throw new Error(`coordinator schedule ${schedule} is not a fixed grid`);
  return grid;
}

/** The last tick instant at or before `t`. */
export function tickAtOrBefore(grid: TickGrid, t: number): number {
  return t - phaseOf(t - grid.offsetMs, grid.periodMs);
}

/** The first tick instant at or after `t`. */
export function tickAtOrAfter(grid: TickGrid, t: number): number {
  return nextAt(grid.offsetMs, grid.periodMs, 0, t);
}

/**
 * `expiryAlignment.marginMs`: the elector's default, which the app does not override. The
 * leader times each renewal so that its lease would expire this long before a follower tick.
 */
export const ALIGNMENT_MARGIN_MS = 300;

/**
 * When the leader will start its next renewal after one that started at `lastStart` (wall
 * clock): the elector's `alignedDelay` rule, restated so the benchmark can spread its kills over
 * the real cycle. The plain target is `lastStart + renewMs`; it is pulled earlier by up to half
 * a renew interval so that the renewed lease would expire `marginMs` before a tick of `grid`.
 * With a 1 s grid and a 5 s interval this keeps every renewal 5 s apart (at tick − lease −
 * margin); with a 2 s grid it makes them 4 s apart.
 */
export function nextRenewalStart(
  lastStart: number,
  lease: { leaseMs: number; renewMs: number },
  grid: TickGrid,
  marginMs = ALIGNMENT_MARGIN_MS,
): number {
  const target = lastStart + lease.renewMs;
  const early = phaseOf(target + lease.leaseMs + marginMs - grid.offsetMs, grid.periodMs);
  return early <= lease.renewMs / 2 ? target - early : target;
}

/**
 * The instants the leader's next renewal may start at, after one that started at `lastStart`:
 * the rule applied with the start `jitterMs` earlier and later. They differ when the plain
 * target lands on a tick-aligned point itself (a 5 s interval on a 1 s grid): a target a hair
 * past that point is kept, but one a hair before it is pulled back by almost a whole period, so
 * the next renewal comes either ~5 s or ~4 s later, and which one turns on the timer's
 * sub-millisecond lateness, not observable from here. Sorted, one instant per distinct outcome.
 */
export function renewalDues(
  lastStart: number,
  lease: { leaseMs: number; renewMs: number },
  grid: TickGrid,
  jitterMs = 5,
): number[] {
  const dues = [nextRenewalStart(lastStart - jitterMs, lease, grid), nextRenewalStart(lastStart + jitterMs, lease, grid)].sort(
    (a, b) => a - b,
  );
  const [early, late] = dues as [number, number];
  return late - early > 4 * jitterMs ? [early, late] : [(early + late) / 2];
}

/** A renewal the leader reported (`renewed`): `at` when it completed, `start` when it was sent. */
export interface Renewal {
  epoch: number;
  at: number;
  latencyMs: number;
  start: number;
}

/** The instance's `renewed` events of term `epoch`, oldest first. */
export function renewalsOf(instance: BenchInstance, epoch: number): Renewal[] {
  const renewals: Renewal[] = [];
  for (const e of instance.events) {
    if (!isLeaderEvent(e, 'renewed') || e.epoch !== epoch) continue;
    const latencyMs = e.latencyMs ?? 0;
    renewals.push({ epoch, at: e.at, latencyMs, start: e.at - latencyMs });
  }
  return renewals;
}

/**
 * Start-to-start intervals between consecutive renewals of the same term, over every instance
 * of the cluster: what the leaders really did.
 */
export function renewalIntervals(instances: readonly BenchInstance[]): number[] {
  const intervals: number[] = [];
  for (const instance of instances) {
    const epochs = new Set(instance.events.filter((e) => isLeaderEvent(e, 'acquired')).map((e) => e.epoch ?? 0));
    for (const epoch of epochs) {
      const renewals = renewalsOf(instance, epoch);
      for (let i = 1; i < renewals.length; i++) {
        intervals.push((renewals[i] as Renewal).start - (renewals[i - 1] as Renewal).start);
      }
    }
  }
  return intervals;
}

function isLeaderEvent(e: TimedEvent | undefined, type: string): e is Extract<TimedEvent, { kind: 'leader' }> {
  return e !== undefined && e.kind === 'leader' && e.type === type;
}

/** The time of the instance's latest leader event of `type` (its emit time), if any. */
export function lastLeaderEvent(instance: BenchInstance, type: string, since = 0): number | undefined {
  for (let i = instance.events.length - 1; i >= 0; i--) {
    const e = instance.events[i];
    if (e && e.kind === 'leader' && e.type === type && e.at >= since) return e.at;
  }
  return undefined;
}

/**
 * A follower has ticked at least once when it has read the lease blob (`blob.head`, reported
 * with its request counts once a second): its timer runs and its storage client is connected,
 * as every follower of a long-running cluster would be.
 */
function warm(instance: BenchInstance): boolean {
  return instance.events.some((e) => e.kind === 'started') && (instance.requests.byOperation['blob.head'] ?? 0) > 0;
}

export interface Ready {
  leader: BenchInstance;
  /** When the leader's current term began (its `acquired` event). */
  acquiredAt: number;
  /** That term's epoch. */
  epoch: number;
}

/**
 * Waits until there is a leader, `count` live instances, and every live instance has started
 * and ticked at least once.
 */
export async function waitForReady(cluster: BenchCluster, count: number, timeoutMs: number): Promise<Ready> {
  return cluster.waitFor(
    () => {
      const live = cluster.instances.filter((i) => i.alive);
      if (live.length !== count || !live.every(warm)) return undefined;
      const leader = cluster.leader();
      const acquired = leader && [...leader.events].reverse().find((e) => isLeaderEvent(e, 'acquired'));
      return leader && acquired
        ? { leader, acquiredAt: acquired.at, epoch: acquired.kind === 'leader' ? (acquired.epoch ?? 0) : 0 }
        : undefined;
    },
    timeoutMs,
    `a leader and ${count} warm instances`,
  );
}

export function round(value: number): number {
  return Math.round(value);
}

/**
 * A goal ratio to 4 decimals, rounded up, so the printed line reads `goal ≤ 1.0667` rather than
 * 1.0666666666666667. Rounding up keeps a goal met exactly met, and moves the limit by less than
 * floor/10,000 (0.5 ms for the 15 s lease: p95 ≤ 16000.5 ms, the same as ≤ 16000 for delays in
 * whole ms); the exact ratio stays in the summary.
 */
export function printableGoalRatio(ratio: number): number {
  return Math.ceil(ratio * 10_000 - 1e-9) / 10_000;
}
