import { describe, expect, it } from 'vitest';
import { Bitset } from '../../src/hub/bitset';

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
