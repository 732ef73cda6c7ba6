// Shared by the .ci scripts: a commander argument parser for whole numbers in a range, so a bad
// value is one line naming the option (commander prints it and exits 1) and never a stack.
import { InvalidArgumentError } from 'commander';

export function wholeNumber(min, max = Number.MAX_SAFE_INTEGER) {
  return (text) => {
    const n = Number(text);
    if (!Number.isSafeInteger(n) || n < min || n > max)
      throw new InvalidArgumentError(`must be a whole number from ${min} to ${max}`);
    return n;
  };
}
