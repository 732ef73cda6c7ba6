/**
 * A fixed-size set of item indexes: the run's dedupe record. One bit per planned item, so a
 * run of N items costs N/8 bytes in memory and in its checkpoint.
 */
export class Bitset {
  private constructor(
    readonly size: number,
    private readonly bytes: Uint8Array,
  ) {}

  static empty(size: number): Bitset {
    if (!Number.isSafeInteger(size) || size < 0) throw new RangeError(`bitset size must be a non-negative integer, got ${size}`);
    return new Bitset(size, new Uint8Array(Math.ceil(size / 8)));
  }

  /** Restores a checkpoint written by `toBase64`. */
  static fromBase64(size: number, encoded: string): Bitset {
    const bytes = new Uint8Array(Buffer.from(encoded, 'base64'));
    if (bytes.length !== Math.ceil(size / 8)) {
      throw new RangeError(`bitset checkpoint holds ${bytes.length} bytes, expected ${Math.ceil(size / 8)} for ${size} items`);
    }
    const spare = size % 8;
    if (spare !== 0 && (bytes[bytes.length - 1] ?? 0) >> spare !== 0) {
      throw new RangeError(`bitset checkpoint marks items past its size ${size}`);
    }
    return new Bitset(size, bytes);
  }

  has(index: number): boolean {
    this.check(index);
    return ((this.bytes[index >> 3] ?? 0) & (1 << (index & 7))) !== 0;
  }

  /** Sets the bit; returns false when it was already set (a duplicate). */
  add(index: number): boolean {
    this.check(index);
    const at = index >> 3;
    const mask = 1 << (index & 7);
    const byte = this.bytes[at] ?? 0;
    if (byte & mask) return false;
    this.bytes[at] = byte | mask;
    return true;
  }

  /** Number of set bits. */
  count(): number {
    let total = 0;
    for (const byte of this.bytes) {
      let b = byte;
      while (b) {
        b &= b - 1;
        total++;
      }
    }
    return total;
  }

  /** Indexes not set, in order, up to `limit`. */
  missing(limit = Number.POSITIVE_INFINITY): number[] {
    const out: number[] = [];
    for (let i = 0; i < this.size && out.length < limit; i++) if (!this.has(i)) out.push(i);
    return out;
  }

  toBase64(): string {
    return Buffer.from(this.bytes).toString('base64');
  }

  clone(): Bitset {
    return new Bitset(this.size, this.bytes.slice());
  }

  private check(index: number): void {
    if (!Number.isInteger(index) || index < 0 || index >= this.size) {
      throw new RangeError(`item index ${index} is outside 0..${this.size - 1}`);
    }
  }
}
