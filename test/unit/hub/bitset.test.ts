import { describe, expect, it } from 'vitest';
import { Bitset } from '../../../src/hub/bitset';

describe('Bitset', () => {
  it.each([0, 1, 7, 8, 9, 64, 1001])('empty(%i) has nothing set and costs ceil(n/8) bytes', (size) => {
    const b = Bitset.empty(size);
    expect(b.size).toBe(size);
    expect(b.count()).toBe(0);
    expect(b.missing()).toEqual(Array.from({ length: size }, (_, i) => i));
    expect(Buffer.from(b.toBase64(), 'base64').length).toBe(Math.ceil(size / 8));
  });

  it.each([-1, 1.5, Number.NaN, Number.POSITIVE_INFINITY])('empty(%s) is refused', (size) => {
    expect(() => Bitset.empty(size)).toThrow(RangeError);
  });

  it('add sets a bit once: a second add of the same index returns false', () => {
    const b = Bitset.empty(20);
    expect(b.has(9)).toBe(false);
    expect(b.add(9)).toBe(true);
    expect(b.has(9)).toBe(true);
    expect(b.add(9)).toBe(false);
    expect(b.count()).toBe(1);
    // Neighbours in the same byte and the next are untouched.
    expect([8, 10, 1, 17].map((i) => b.has(i))).toEqual([false, false, false, false]);
  });

  it('counts and lists the missing indexes across byte boundaries', () => {
    const b = Bitset.empty(19);
    for (const i of [0, 7, 8, 15, 16, 18]) expect(b.add(i)).toBe(true);
    expect(b.count()).toBe(6);
    expect(b.missing()).toEqual([1, 2, 3, 4, 5, 6, 9, 10, 11, 12, 13, 14, 17]);
    expect(b.missing(3)).toEqual([1, 2, 3]);
    expect(b.missing(0)).toEqual([]);
  });

  it('is full when every index is added', () => {
    const b = Bitset.empty(13);
    for (let i = 12; i >= 0; i--) b.add(i);
    expect(b.count()).toBe(13);
    expect(b.missing()).toEqual([]);
  });

  it.each([
    ['below zero', -1],
    ['at size', 10],
    ['past size', 999],
    ['fractional', 2.5],
    ['NaN', Number.NaN],
  ])('an index %s is a RangeError for has and add, and changes nothing', (_name, index) => {
    const b = Bitset.empty(10);
    expect(() => b.has(index)).toThrow(RangeError);
    expect(() => b.add(index)).toThrow(/outside 0\.\.9/);
    expect(b.count()).toBe(0);
  });

  it('round-trips through base64', () => {
    const b = Bitset.empty(100);
    const set = [0, 3, 31, 32, 63, 64, 98, 99];
    for (const i of set) b.add(i);
    const restored = Bitset.fromBase64(100, b.toBase64());
    expect(restored.size).toBe(100);
    expect(restored.count()).toBe(set.length);
    for (let i = 0; i < 100; i++) expect(restored.has(i)).toBe(set.includes(i));
    expect(restored.toBase64()).toBe(b.toBase64());
    // The restored set is its own: adding to it does not change the original.
    restored.add(50);
    expect(b.has(50)).toBe(false);
  });

  it('round-trips an empty set of size 0', () => {
    const restored = Bitset.fromBase64(0, Bitset.empty(0).toBase64());
    expect(restored.count()).toBe(0);
    expect(restored.missing()).toEqual([]);
  });

  it.each([
    [16, 8],
    [8, 16],
    [9, 8],
    [64, 0],
  ])('a checkpoint for %i items is refused as one for %i', (written, expected) => {
    const encoded = Bitset.empty(written).toBase64();
    expect(() => Bitset.fromBase64(expected, encoded)).toThrow(RangeError);
    expect(() => Bitset.fromBase64(expected, encoded)).toThrow(/expected/);
  });

  it('a checkpoint with bits set past the size is refused or ignored, never counted', () => {
    // 3 items fit in one byte; 0xff also sets bits 3..7, which no item owns.
    const encoded = Buffer.from([0xff]).toString('base64');
    let restored: Bitset;
    try {
      restored = Bitset.fromBase64(3, encoded);
    } catch (err) {
      expect(err).toBeInstanceOf(RangeError);
      return;
    }
    expect(restored.count()).toBe(3);
    expect(restored.missing()).toEqual([]);
  });

  it('clone is independent', () => {
    const a = Bitset.empty(8);
    a.add(1);
    const b = a.clone();
    b.add(2);
    expect(a.has(2)).toBe(false);
    expect(b.has(1)).toBe(true);
    expect(b.size).toBe(8);
  });
});

describe('Bitset checkpoints', () => {
  const setOf = (size: number, indexes: Iterable<number>): Bitset => {
    const b = Bitset.empty(size);
    for (const i of indexes) b.add(i);
    return b;
  };
  const roundTrip = (b: Bitset): Bitset => Bitset.fromCheckpoint(b.size, b.toCheckpoint());

  it.each([
    ['empty', setOf(0, [])],
    ['nothing set', setOf(1001, [])],
    [
      'everything set',
      setOf(
        1001,
        Array.from({ length: 1001 }, (_, i) => i),
      ),
    ],
    [
      'a prefix not on a byte boundary',
      setOf(
        77,
        Array.from({ length: 45 }, (_, i) => i),
      ),
    ],
    ['only the last item', setOf(9, [8])],
    [
      'alternating items',
      setOf(
        40,
        Array.from({ length: 20 }, (_, i) => 2 * i),
      ),
    ],
    [
      'a run longer than one varint byte holds',
      setOf(
        100_003,
        Array.from({ length: 100_001 }, (_, i) => i + 1),
      ),
    ],
  ])('round-trips %s, item by item', (_what, b) => {
    const restored = roundTrip(b);
    expect(restored.size).toBe(b.size);
    expect(restored.toBase64()).toBe(b.toBase64());
  });

  it('round-trips random sets of every size up to 70', () => {
    let seed = 7;
    const random = (): number => (seed = (seed * 1_103_515_245 + 12_345) % 2 ** 31) / 2 ** 31;
    for (let size = 0; size <= 70; size++) {
      for (let round = 0; round < 20; round++) {
        const b = setOf(
          size,
          Array.from({ length: size }, (_, i) => i).filter(() => random() < 0.5),
        );
        expect(roundTrip(b).toBase64(), `size ${size}`).toBe(b.toBase64());
      }
    }
  });

  it('stays small for a million items counted up to the in-flight window, where the plain bitset is 125 KB', () => {
    const size = 1_000_000;
    // Counted up to 900,000, and beyond it 4,096 messages of 8 items each in flight, every other one counted.
    const counted = Array.from({ length: 900_000 }, (_, i) => i);
    for (let m = 0; m < 4096; m += 2) for (let k = 0; k < 8; k++) counted.push(900_000 + m * 8 + k);
    const b = setOf(size, counted);
    const checkpoint = b.toCheckpoint();
    expect(Buffer.from(b.toBase64(), 'base64').length).toBe(125_000);
    // One run per message-sized hole, two bytes each at most, in base64.
    expect(checkpoint.length).toBeLessThan(6_000);
    expect(Bitset.fromCheckpoint(size, checkpoint).count()).toBe(counted.length);
    // And the same window over 10k items costs the same, so bytes per item do not grow with the run.
    const small = setOf(10_000 + 4096 * 8, [
      ...Array.from({ length: 10_000 }, (_, i) => i),
      ...counted.slice(900_000).map((i) => i - 890_000),
    ]);
    expect(Math.abs(small.toCheckpoint().length - checkpoint.length)).toBeLessThan(16);
  });

  // Counted out of plan order (hedged copies, many shards, one item a message), runs can be a
  // few items long, and a byte of run length per run costs up to eight times the plain bitset.
  it.each([
    ['every other item', (i: number) => i % 2 === 0],
    ['two of every three', (i: number) => i % 3 !== 2],
    ['a pseudo-random half', (i: number) => (i * 2_654_435_761) % 2 ** 32 < 2 ** 31],
  ])('never writes more than the plain bitset: %s of a million items', (_what, counted) => {
    const size = 1_000_000;
    const b = setOf(size, Array.from({ length: size }, (_, i) => i).filter(counted));
    const checkpoint = b.toCheckpoint();
    expect(checkpoint.length).toBeLessThanOrEqual(b.toBase64().length);
    expect(Bitset.fromCheckpoint(size, checkpoint).toBase64()).toBe(b.toBase64());
  });

  it('still reads the plain bitset older run records hold', () => {
    const b = setOf(100, [0, 5, 99]);
    expect(Bitset.fromCheckpoint(100, b.toBase64()).toBase64()).toBe(b.toBase64());
  });

  it.each([
    [
      'runs that cover fewer items than the size',
      10,
      `r:${Buffer.from([3, 4]).toString('base64')}`,
      /covers 7 items, expected 10/,
    ],
    ['runs past the size', 10, `r:${Buffer.from([3, 9]).toString('base64')}`, /past its size 10/],
    ['a run length cut off mid-varint', 200, `r:${Buffer.from([0x81]).toString('base64')}`, /ends inside a run length/],
    ['a run length too long to read', 10, `r:${Buffer.from(Array(9).fill(0xff)).toString('base64')}`, /too long to read/],
  ])('refuses %s', (_what, size, encoded, message) => {
    expect(() => Bitset.fromCheckpoint(size, encoded)).toThrow(RangeError);
    expect(() => Bitset.fromCheckpoint(size, encoded)).toThrow(message);
  });
});
