/**
 * The bytes side of the storage request counter, without storage: what a request body counts as,
 * and how the bytes add up by operation. The integration test checks the same on real SDK calls.
 */
import { describe, expect, it } from 'vitest';
import { requestBodyBytes, requestCountsSince, StorageRequestCounter } from '../../../src/storage/request-counter';

describe('requestBodyBytes', () => {
  it('takes a declared Content-Length first', () => {
    expect(requestBodyBytes('ignored', '42')).toBe(42);
    expect(requestBodyBytes(undefined, '0')).toBe(0);
  });

  it('measures a string in UTF-8 bytes, and binary bodies by their length', () => {
    expect(requestBodyBytes('héllo', undefined)).toBe(6);
    expect(requestBodyBytes(Buffer.from([1, 2, 3]), undefined)).toBe(3);
    expect(requestBodyBytes(new Uint8Array(5), undefined)).toBe(5);
    expect(requestBodyBytes(new ArrayBuffer(7), undefined)).toBe(7);
  });

  it('counts no body, a stream factory and a malformed length as 0 or the body', () => {
    expect(requestBodyBytes(undefined, undefined)).toBe(0);
    expect(requestBodyBytes(() => undefined, undefined)).toBe(0);
    expect(requestBodyBytes('abc', 'not a number')).toBe(3);
  });
});

describe('StorageRequestCounter bytes', () => {
  it('adds bytes by operation and leaves out operations that sent none', () => {
    const counter = new StorageRequestCounter();
    counter.record('blob.put', 100);
    counter.record('blob.get');
    counter.record('queue.messages.send', 30);
    counter.record('blob.put', 20);
    expect(counter.total).toBe(4);
    expect(counter.snapshot()).toEqual({ 'blob.get': 1, 'blob.put': 2, 'queue.messages.send': 1 });
    expect(counter.bytesSnapshot()).toEqual({ 'blob.put': 120, 'queue.messages.send': 30 });
    expect(counter.totalBytes).toBe(150);
  });
});

describe('requestCountsSince', () => {
  it.each([
    [{ 'blob.get': 5, 'queue.put': 2 }, { 'blob.get': 3 }, { 'blob.get': 2, 'queue.put': 2 }],
    [{ 'blob.get': 3 }, { 'blob.get': 3 }, {}],
    [{ 'blob.get': 3 }, {}, { 'blob.get': 3 }],
  ])('%j since %j is %j, operations with none left out', (now, before, expected) => {
    expect(requestCountsSince(now, before)).toEqual(expected);
  });
});
