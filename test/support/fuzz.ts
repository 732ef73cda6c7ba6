/**
 * Seeds for the randomized (property) tests. In `npm test` every property draws from one fixed
 * seed, so CI is deterministic and a red run is a real change, not a new draw. `npm run
 * test:fuzz` sets BATON_FUZZ_SEED to a fresh seed and BATON_FUZZ_RUNS to more runs; fast-check
 * then names the seed and path of any counterexample, which replays it exactly:
 *
 *   BATON_FUZZ_SEED=<seed> BATON_FUZZ_RUNS=<runs> npx vitest run property
 *
 * (run i is drawn from the seed, so the replay needs at least the runs that found it).
 *
 * Every counterexample found is also kept as a fixed example of its property (fast-check's
 * `examples`), so it runs first, whatever the seed.
 */
import type fc from 'fast-check';

/** The seed `npm test` uses. Any integer would do; this one is the day the seeds were fixed. */
export const FIXED_SEED = 20261124;

function integerFrom(name: string, text: string | undefined, min: number): number | undefined {
  if (text === undefined || text === '') return undefined;
  const n = Number(text);
  if (!Number.isSafeInteger(n) || n < min)
    throw new Error(`${name} must be an integer of at least ${min} (got ${JSON.stringify(text)})`);
  return n;
}

export interface FuzzSettings {
  seed: number;
  /** Runs per property; undefined keeps each property's own count. */
  runs: number | undefined;
  /** Whether the seed came from the environment rather than FIXED_SEED. */
  fromEnv: boolean;
}

export function fuzzSettings(env: NodeJS.ProcessEnv = process.env): FuzzSettings {
  const seed = integerFrom('BATON_FUZZ_SEED', env.BATON_FUZZ_SEED, -(2 ** 31));
  return { seed: seed ?? FIXED_SEED, runs: integerFrom('BATON_FUZZ_RUNS', env.BATON_FUZZ_RUNS, 1), fromEnv: seed !== undefined };
}

/**
 * fast-check parameters for one property: the seed (fixed, or the fuzz run's), the run count
 * (the property's own, or the fuzz run's), and the counterexamples kept as regression cases.
 * Prints the seed for each property, so a log always says what was drawn.
 */
export function propertyParameters<Ts>(
  label: string,
  numRuns: number,
  examples: Ts[] = [],
  settings: FuzzSettings = fuzzSettings(),
): fc.Parameters<Ts> {
  const runs = settings.runs ?? numRuns;
  console.log(
    `property "${label}": seed ${settings.seed}${settings.fromEnv ? ' (BATON_FUZZ_SEED)' : ' (fixed)'}, ${runs} runs, ` +
      `${examples.length} kept counterexample(s)`,
  );
  return { seed: settings.seed, numRuns: runs, examples };
}
