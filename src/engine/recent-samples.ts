/**
 * The last `capacity` samples of a measure, for a running percentile: old samples drop out, so
 * the percentile follows the run as its items get faster or slower. Memory is fixed.
 */
export class RecentSamples {
  private readonly values: number[] = [];
  private next = 0;

  constructor(readonly capacity = 256) {
    if (!Number.isInteger(capacity) || capacity < 1) throw new RangeError(`capacity must be a positive integer, got ${capacity}`);
  }

  /** Samples held (at most `capacity`). */
  get count(): number {
    return this.values.length;
  }

  /** Keeps a sample; one that is not a finite number of 0 or more is ignored. */
  add(value: number): void {
    if (!Number.isFinite(value) || value < 0) return;
    if (this.values.length < this.capacity) this.values.push(value);
    else this.values[this.next] = value;
    this.next = (this.next + 1) % this.capacity;
  }

  /**
   * The `p` percentile (0 < p ≤ 1) of the samples held, by the nearest-rank method: the smallest
   * sample with at least p of them at or below it. Undefined with no samples.
   */
  percentile(p: number): number | undefined {
    if (this.values.length === 0) return undefined;
    const sorted = [...this.values].sort((a, b) => a - b);
    const rank = Math.min(sorted.length, Math.max(1, Math.ceil(p * sorted.length)));
    return sorted[rank - 1];
  }
}
