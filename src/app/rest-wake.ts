import { Schedule } from '../schedule/schedule';

/**
 * How far before an occurrence a leader may be back when it is due on one of the coordinator's
 * own ticks: the tick at that instant brings the leader, and this covers a storage-time estimate
 * that runs a little behind and a timer that fires a little early.
 */
export const ON_TICK_WAKE_MS = 500;
/** A delayed message surfaces within a second of its time (visibility is in whole seconds). */
const MESSAGE_ROUNDING_MS = 1000;

/**
 * When a resting lease must end for an occurrence due at `dueAt` (wall-time ms), so that a leader
 * is back in time without holding an invocation open meanwhile. Two things bring one: the
 * coordinator timer's next tick, and the tick beacon surfacing at the rest's end (its receiver is
 * as late as the queue trigger's polling). An occurrence on the timer's grid needs only the tick
 * at its own instant; any other needs the earlier of a whole tick period or the beacon's
 * lateness ahead of it.
 */
export function restWakeFor(
  coordinatorSchedule: string,
  maxPollingIntervalMs: number,
): { wakeAt(dueAt: number): number; aheadMs: number } {
  const grid = Schedule.parse(coordinatorSchedule, 'BATON_COORDINATOR_SCHEDULE').fixedPeriod();
  const aheadMs = Math.min(grid?.periodMs ?? Infinity, MESSAGE_ROUNDING_MS + maxPollingIntervalMs) + ON_TICK_WAKE_MS;
  const onGrid = (at: number): boolean => grid !== undefined && mod(at - grid.offsetMs, grid.periodMs) === 0;
  return { aheadMs, wakeAt: (dueAt) => dueAt - (onGrid(dueAt) ? ON_TICK_WAKE_MS : aheadMs) };
}

function mod(a: number, n: number): number {
  return ((a % n) + n) % n;
}
