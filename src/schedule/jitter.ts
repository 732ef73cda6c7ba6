import { createHash } from 'node:crypto';

/**
 * How far a job's occurrence is spread past its instant, with `jitterSeconds` on the job: a
 * fraction of the window drawn from a hash of the job and the occurrence, so every leader, either
 * engine and every process computes the same start, and a run id stays its occurrence. Not
 * random per run: a restarted leader does not move a start it already waited for.
 */
export function jitterMs(job: string, occurrence: Date, jitterSeconds: number): number {
  if (jitterSeconds <= 0) return 0;
  const digest = createHash('sha256').update(`${job}\n${occurrence.toISOString()}`).digest();
  // 48 bits, exactly representable, spread evenly over [0, 1).
  const fraction = digest.readUIntBE(0, 6) / 2 ** 48;
  return Math.floor(fraction * jitterSeconds * 1000);
}
