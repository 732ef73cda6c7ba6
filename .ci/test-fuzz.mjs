#!/usr/bin/env node
// The property tests with fresh seeds. `npm test` runs them on one fixed seed (test/support/fuzz.ts)
// so CI is deterministic; this draws new cases instead, and names the seed of any failure.
//
//   npm run test:fuzz                         one fresh seed, 10,000 runs per property (10x npm test)
//   npm run test:fuzz -- --runs 50000 --rounds 3
//   npm run test:fuzz -- --seed -1552350364 --runs 1000   replay one seed with the runs that found it
//
// A counterexample it finds belongs in its property's kept examples, with the product fixed.
import { spawnSync } from 'node:child_process';
import { randomInt } from 'node:crypto';
import { join } from 'node:path';
import { parseArgs } from 'node:util';

const { values } = parseOrExit({
  options: {
    runs: { type: 'string', default: '10000' },
    rounds: { type: 'string', default: '1' },
    seed: { type: 'string' },
    help: { type: 'boolean', short: 'h', default: false },
  },
});
/** parseArgs, with a bad option or a stray word as one line and exit 2 instead of a stack. */
function parseOrExit(config) {
  try {
    return parseArgs(config);
  } catch (err) {
    console.error(`test-fuzz: ${err.message} (npm run test:fuzz -- --help)`);
    process.exit(2);
  }
}
if (values.help) {
  console.log('usage: node .ci/test-fuzz.mjs [--runs 10000] [--rounds 1] [--seed S]');
  process.exit(0);
}

function integer(name, min, max = Number.MAX_SAFE_INTEGER) {
  const n = Number(values[name]);
  if (!Number.isSafeInteger(n) || n < min || n > max) {
    console.error(`test-fuzz: --${name} must be an integer from ${min} to ${max} (got ${JSON.stringify(values[name])})`);
    process.exit(2);
  }
  return n;
}
const runs = integer('runs', 1);
const rounds = values.seed === undefined ? integer('rounds', 1) : 1;
const fixedSeed = values.seed === undefined ? undefined : integer('seed', -(2 ** 31), 2 ** 31 - 1);

const vitest = join('node_modules', '.bin', 'vitest');
const failedSeeds = [];
for (let round = 1; round <= rounds; round++) {
  const seed = fixedSeed ?? randomInt(-(2 ** 31), 2 ** 31);
  console.log(`test-fuzz: round ${round} of ${rounds}: seed ${seed}, ${runs} runs per property`);
  const result = spawnSync(vitest, ['run', '--project', 'suite', 'property'], {
    stdio: 'inherit',
    env: { ...process.env, BATON_FUZZ_SEED: String(seed), BATON_FUZZ_RUNS: String(runs) },
  });
  if (result.status !== 0) {
    failedSeeds.push(seed);
    // fast-check draws run i from the seed, so a replay needs as many runs as found it.
    console.log(
      `test-fuzz: round ${round} FAILED with seed ${seed}; replay: BATON_FUZZ_SEED=${seed} BATON_FUZZ_RUNS=${runs} npx vitest run property`,
    );
  }
}
console.log(
  failedSeeds.length === 0
    ? `test-fuzz: ${rounds} round(s) passed`
    : `test-fuzz: ${failedSeeds.length} of ${rounds} round(s) failed; seeds ${failedSeeds.join(', ')}`,
);
process.exit(failedSeeds.length === 0 ? 0 : 1);
