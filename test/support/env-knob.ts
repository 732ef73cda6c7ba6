/**
 * A test's long form is chosen by an environment variable (rounds, occurrences, items). A typo
 * must stop the test at once with the variable's name, not turn into NaN and a five-minute wait.
 */
export function positiveIntegerFromEnv(name: string, fallback: number): number {
  const text = process.env[name];
  if (text === undefined || text === '') return fallback;
  const value = Number(text);
  if (!Number.isSafeInteger(value) || value < 1) throw new Error(`${name} must be a whole number of at least 1, got "${text}"`);
  return value;
}
