import { systemClock, type Clock } from '../../src/clock/clock';

/**
 * The real clock with a wall clock `offsetMs` off (positive: fast), as on a machine whose time
 * sync is broken. The monotonic clock and timers are the real ones: skew moves the date, not
 * the rate.
 */
export function skewedClock(offsetMs: number, base: Clock = systemClock): Clock {
  return {
    now: () => base.now(),
    date: () => new Date(base.date().getTime() + offsetMs),
    setTimeout: (callback, ms) => base.setTimeout(callback, ms),
    clearTimeout: (handle) => base.clearTimeout(handle),
  };
}
