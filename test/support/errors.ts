import { expect } from 'vitest';
import { BatonError } from '../../src/errors';

/**
 * Runs `fn`, expects it to throw an error of `type` with a non-empty one-line message, and
 * returns it for further checks.
 */
export function oneLineError<E extends BatonError>(type: abstract new (...args: never[]) => E, fn: () => unknown): E {
  try {
    fn();
  } catch (err) {
    expect(err).toBeInstanceOf(type);
    const e = err as E;
    expect(e.message).not.toMatch(/[\r\n]/);
    expect(e.message.length).toBeGreaterThan(0);
    return e;
  }
  throw new Error(`expected a ${type.name}`);
}
