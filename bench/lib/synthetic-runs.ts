import { Bitset } from '../../src/hub/bitset';
import type { RunRecord } from '../../src/hub/run-record';
import type { RunDetails } from '../../src/hub/status';
import { expectedSynthetic, type SyntheticJobSpec } from '../../functions/synthetic-job';

/**
 * The synthetic runs the scale benchmarks and the scale e2e tests make, and the one check of
 * their answer, so a benchmark's "exact" and a test's "exact" are the same claim.
 */

/** What the scale runs pack into one message, unless a case says otherwise. */
export const SCALE_ITEMS_PER_MESSAGE = 100;

/** A synthetic job of `items` items, named by its size (and its packing, when not the usual). */
export function scaleJobSpec(items: number, itemsPerMessage: number = SCALE_ITEMS_PER_MESSAGE): SyntheticJobSpec {
  const packing = itemsPerMessage === SCALE_ITEMS_PER_MESSAGE ? '' : `-per-${itemsPerMessage}`;
  return { name: `scale-${items}${packing}`, items, itemsPerMessage };
}

/**
 * Why a finished run of `spec` (a job whose items all succeed) is not exact, one reason a line;
 * none when it succeeded, counted every planned item once and wrote the closed-form output.
 * The output is the proof against double counting: an item folded twice adds to the count, the
 * sum and the sum of squares, whatever the counters say.
 */
export function inexactness(spec: SyntheticJobSpec, details: RunDetails): string[] {
  const { record, output } = details;
  const c = record.counters;
  const expected = expectedSynthetic(spec).output;
  const reasons: string[] = [];
  if (record.state !== 'succeeded') reasons.push(`state ${record.state}${record.endReason ? ` (${record.endReason})` : ''}`);
  if (JSON.stringify(output?.output) !== JSON.stringify(expected)) {
    reasons.push(`output ${JSON.stringify(output?.output)}, expected ${JSON.stringify(expected)}`);
  }
  if (c.planned !== spec.items || c.succeeded !== spec.items || c.failed !== 0 || c.rejected !== 0) {
    reasons.push(`counters ${JSON.stringify(c)}, expected ${spec.items} planned and succeeded, none failed or rejected`);
  }
  return reasons;
}

/**
 * Why a run record's checkpoint of `spec` is not exact so far, one reason a line; none when its
 * accumulator is the fold of exactly the items its dedupe set marks counted, and the counters
 * count those items. This is what a run that has not ended can be held to: its output does not
 * exist yet, but a next leader resumes from this checkpoint, so an item folded twice (or marked
 * and not folded) shows here first.
 */
export function checkpointInexactness(spec: SyntheticJobSpec, record: RunRecord): string[] {
  const c = record.counters;
  const seen = record.seen === null ? Bitset.empty(c.planned) : Bitset.fromCheckpoint(c.planned, record.seen);
  const uncounted: number[] = [];
  for (let i = 0; i < spec.items; i++) if (i >= seen.size || !seen.has(i)) uncounted.push(i);
  const marked = spec.items - uncounted.length;
  const expected = expectedSynthetic(spec, uncounted).output;
  const reasons: string[] = [];
  // The accumulator is written with the first fold; before it, nothing may be marked.
  const acc = record.acc === null && marked === 0 ? expected : record.acc;
  if (JSON.stringify(acc) !== JSON.stringify(expected)) {
    reasons.push(
      `accumulator ${JSON.stringify(record.acc)}, the ${marked} items marked counted fold to ${JSON.stringify(expected)}`,
    );
  }
  if (c.succeeded + c.failed !== marked) {
    reasons.push(`counters ${JSON.stringify(c)} count ${c.succeeded + c.failed} items, the dedupe set marks ${marked}`);
  }
  return reasons;
}
