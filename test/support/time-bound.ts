/**
 * A duration a test asserts, held against a floor measured in the same test. A bound such as
 * "the cluster stops within 10 s of SIGTERM" tells a hang or a wrong mechanism (expiry instead of
 * release) from a slow machine only on the machine it was written on; here the bound grows by how
 * much slower the fixed calibration work (test/support/calibration.mjs) runs at this moment than
 * on the reference machine, and never shrinks below what was written.
 */
import { calibrate, REFERENCE_ROUND_MS } from './calibration.mjs';

export interface TimeBound {
  /** The bound to assert, in ms. */
  readonly ms: number;
  /** The floor measured now: one calibration round, in ms. */
  readonly floorMs: number;
  /** For the assertion's message: the bound as written, the floor and what they made. */
  readonly why: string;
}

/**
 * `writtenMs` as the reference machine meets it, scaled by the floor measured now: one round,
 * just before the timed action, under the same load. The suite's start-up calibration has warmed
 * the disk cache the median of three guards against there; a round costs two processes (about
 * 0.8 s of CPU), and some files assert a duration in every case of a table.
 */
export async function timeBound(writtenMs: number): Promise<TimeBound> {
  const { medianMs, factor } = await calibrate({ rounds: 1 });
  const ms = Math.round(writtenMs * factor);
  return {
    ms,
    floorMs: medianMs,
    why: `bound ${ms} ms: ${writtenMs} ms on the reference machine x ${factor} (floor measured now ${Math.round(medianMs)} ms, reference ${REFERENCE_ROUND_MS} ms)`,
  };
}
