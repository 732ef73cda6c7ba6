import { afterEach, describe, expect, it } from 'vitest';
import { positiveIntegerFromEnv } from './env-knob';

const NAME = 'BATON_TEST_KNOB_FOR_UNIT_TEST';

afterEach(() => {
  delete process.env[NAME];
});

describe('positiveIntegerFromEnv', () => {
  it.each([
    { text: undefined, expected: 6 },
    { text: '', expected: 6 },
    { text: '20', expected: 20 },
    { text: '1', expected: 1 },
  ])('$text gives $expected', ({ text, expected }) => {
    if (text !== undefined) process.env[NAME] = text;
    expect(positiveIntegerFromEnv(NAME, 6)).toBe(expected);
  });

  it.each(['abc', '0', '-3', '2.5', '1e400', ' '])('"%s" is refused with the variable named', (text) => {
    process.env[NAME] = text;
    expect(() => positiveIntegerFromEnv(NAME, 6)).toThrow(`${NAME} must be a whole number of at least 1, got "${text}"`);
  });
});
