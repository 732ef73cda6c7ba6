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
import { Command } from 'commander';
import { wholeNumber } from './options.mjs';

const program = new Command('npm run test:fuzz --')
  .description('the property tests with fresh seeds (npm test runs them on one fixed seed)')
  .option('--runs <n>', 'runs per property', wholeNumber(1), 10_000)
  .option('--rounds <k>', 'fresh seeds to draw, one round each', wholeNumber(1), 1)
  .option('--seed <s>', 'replay this seed instead (one round)', wholeNumber(-(2 ** 31), 2 ** 31 - 1))
  .parse();
const { runs, seed: fixedSeed } = program.opts();
const rounds = fixedSeed === undefined ? program.opts().rounds : 1;

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
