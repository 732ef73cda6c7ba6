/**
 * How much slower this machine is, now, than the idle 2-core machine the suite's caps were set
 * on. Every cap on a wait in the suite is multiplied by it, so a slower or busier machine waits
 * longer for the same condition instead of failing; a cap only decides that something hung.
 *
 * vitest.config.mts measures it once per run, before any worker starts, and hands it on through
 * BATON_TEST_SLOWDOWN, which the workers and every process they spawn inherit. Set
 * BATON_TEST_SLOWDOWN yourself to skip the measurement (docs/testing.md).
 */
import { parseSlowdown, SLOWDOWN_ENV } from './calibration.mjs';

/** The factor this run measured (1 where nothing measured it, as in a benchmark run by hand). */
export function slowdown(): number {
  const text = process.env[SLOWDOWN_ENV];
  return text === undefined || text === '' ? 1 : parseSlowdown(text);
}

/** A cap on a wait, in ms, for this machine: `ms` on the reference machine. */
export function patience(ms: number): number {
  return Math.round(ms * slowdown());
}

/** For a timeout message: the cap, and how it was scaled. */
export function describePatience(ms: number): string {
  const factor = slowdown();
  return factor === 1 ? `${ms} ms` : `${patience(ms)} ms (${ms} ms x slowdown ${factor})`;
}

/**
 * A schedule's period, in whole seconds, for a test that runs a job every `seconds` on the
 * reference machine: the shortest divisor of a minute (so a `*\/N` seconds field stays evenly
 * spaced) at or above `seconds` x the slowdown, 30 at most. A starved leader whose tick or run
 * outlasts a period rightly skips an occurrence (the overlap and catch-up policies); a period
 * that grows with the machine keeps that a fraction of it, as on the reference machine.
 */
export function periodSeconds(seconds: number): number {
  return [1, 2, 3, 4, 5, 6, 10, 12, 15, 20, 30].find((s) => s >= seconds * slowdown()) ?? 30;
}
