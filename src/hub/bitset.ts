/** Marks a checkpoint written by `toCheckpoint`; anything else is the older plain bitset. */
const RUNS_PREFIX = 'r:';

/**
 * A fixed-size set of item indexes: the run's dedupe record. One bit per planned item in memory
 * (N/8 bytes for N items).
 *
 * Its checkpoint (`toCheckpoint`) is the lengths of the alternating runs of unset and set items,
 * not the bits: items are counted roughly in plan order, so the set is a long counted prefix
 * with holes only where messages are still in flight. The checkpoint then grows with the number
 * of holes, which dispatch bounds (`BATON_MAX_IN_FLIGHT`), not with the run: a leader that
 * checkpoints every few hundred results writes about the same bytes per item at 10k items as at
 * 1M.
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

  /** Restores a checkpoint written by `toCheckpoint`, or by the plain bitset of `toBase64`. */
  static fromCheckpoint(size: number, encoded: string): Bitset {
    if (!encoded.startsWith(RUNS_PREFIX)) return Bitset.fromBase64(size, encoded);
    const set = Bitset.empty(size);
    const data = Buffer.from(encoded.slice(RUNS_PREFIX.length), 'base64');
    let at = 0;
    let filled = false;
    for (let pos = 0; pos < data.length;) {
      // LEB128: seven bits a byte, low first; a run is at most Number.MAX_SAFE_INTEGER long.
      let length = 0;
      let scale = 1;
      for (;;) {
        if (pos >= data.length) throw new RangeError('bitset checkpoint ends inside a run length');
        const byte = data[pos++] as number;
        length += (byte & 0x7f) * scale;
        if (!(byte & 0x80)) break;
        scale *= 128;
        if (scale > Number.MAX_SAFE_INTEGER) throw new RangeError('bitset checkpoint has a run length too long to read');
      }
      if (at + length > size) throw new RangeError(`bitset checkpoint marks items past its size ${size}`);
      if (filled) set.fill(at, at + length);
      at += length;
      filled = !filled;
    }
    if (at !== size) throw new RangeError(`bitset checkpoint covers ${at} items, expected ${size}`);
    return set;
  }

  /** Restores the plain bitset `toBase64` writes: N/8 bytes. */
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

  /** The plain bitset, N/8 bytes whatever is set; `toCheckpoint` is what a run record keeps. */
  toBase64(): string {
    return Buffer.from(this.bytes).toString('base64');
  }

  /**
   * The run lengths, unset first, as LEB128 varints in base64 (see the class comment); or the
   * plain bitset where that is no bigger. Items counted far out of plan order (hedged copies,
   * many shards, one item a message) make runs of a few items, at a byte or more each: up to
   * eight times the plain bitset, which stays N/8 bytes whatever the order.
   */
  toCheckpoint(): string {
    const plainBytes = this.bytes.length;
    const out: number[] = [];
    const push = (length: number): void => {
      let rest = length;
      while (rest >= 0x80) {
        out.push((rest % 0x80) | 0x80);
        rest = Math.floor(rest / 0x80);
      }
      out.push(rest);
    };
    let current = false;
    let length = 0;
    for (let i = 0; i < this.size;) {
      // Past the plain bitset's size the runs can only lose: stop counting them.
      if (out.length >= plainBytes) return this.toBase64();
      const byte = this.bytes[i >> 3] as number;
      // Whole bytes of one kind are the common case: take them eight items at a time.
      if ((i & 7) === 0 && i + 8 <= this.size && (byte === 0 || byte === 0xff)) {
        const bit = byte === 0xff;
        if (bit !== current) {
          push(length);
          current = bit;
          length = 0;
        }
        length += 8;
        i += 8;
        continue;
      }
      const bit = (byte & (1 << (i & 7))) !== 0;
      if (bit !== current) {
        push(length);
        current = bit;
        length = 0;
      }
      length++;
      i++;
    }
    push(length);
    if (out.length >= plainBytes && plainBytes > 0) return this.toBase64();
    return RUNS_PREFIX + Buffer.from(out).toString('base64');
  }

  clone(): Bitset {
    return new Bitset(this.size, this.bytes.slice());
  }

  /** Sets every item in [from, to). */
  private fill(from: number, to: number): void {
    let i = from;
    for (; i < to && i & 7; i++) this.add(i);
    for (; i + 8 <= to; i += 8) this.bytes[i >> 3] = 0xff;
    for (; i < to; i++) this.add(i);
  }

  private check(index: number): void {
    if (!Number.isInteger(index) || index < 0 || index >= this.size) {
      throw new RangeError(`item index ${index} is outside 0..${this.size - 1}`);
    }
  }
}
