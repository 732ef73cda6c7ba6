// The fixed piece of work that tells how fast this machine is right now. vitest.config.mts times
// it once before any worker starts (the suite's slowdown); test/support/time-bound.ts times it
// inside a test that asserts a duration (that test's floor). Plain ESM, so that the config can
// load it without compiling TypeScript.
import { spawn } from 'node:child_process';
import { dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '../..');

// Load an Azure SDK: reading and compiling a few hundred modules, what every process the suite
// spawns does first and most of what a short one does. Rounds used to hash 100,000 times after
// it, a native loop that nearly doubled the CPU of each of the suite's 27 or so rounds.
const WORK = `require('@azure/storage-blob');`;

/**
 * The median, over three rounds, of one round of the work: two processes at once, because the
 * suite's speed is what two cores give it. On two idle cores of the slower of the machines the
 * suite has run on, REFERENCE_ROUND_MS (docs/testing.md): the 700 ms the round with hashing took
 * there, times what this round takes against that one on one machine (452 against 817 ms, each
 * the mean of two runs' medians over seven rounds), so the slowdowns the suite prints keep their
 * scale.
 */
export const REFERENCE_ROUND_MS = 385;

function round() {
  const started = performance.now();
  const one = () =>
    new Promise((done, fail) => {
      const child = spawn(process.execPath, ['-e', WORK], { cwd: root, stdio: 'ignore' });
      child.once('error', fail);
      child.once('exit', (code) => (code === 0 ? done() : fail(new Error(`calibration process exited ${code}`))));
    });
  return Promise.all([one(), one()]).then(() => performance.now() - started);
}

/** Where the measured factor travels: the workers and every process they spawn inherit it. */
export const SLOWDOWN_ENV = 'BATON_TEST_SLOWDOWN';

/** A given BATON_TEST_SLOWDOWN; a bad value is an error naming the variable, never NaN. */
export function parseSlowdown(text) {
  const value = Number(text);
  if (!Number.isFinite(value) || value < 1) throw new Error(`${SLOWDOWN_ENV} must be a number of at least 1, got "${text}"`);
  return value;
}

/**
 * `rounds` rounds (the suite's three: the first also warms the disk cache); the factor is the
 * median over the reference, at least 1.
 */
export async function calibrate({ rounds = 3 } = {}) {
  const roundsMs = [];
  for (let i = 0; i < rounds; i++) roundsMs.push(await round());
  const medianMs = [...roundsMs].sort((a, b) => a - b)[Math.floor((rounds - 1) / 2)];
  return { roundsMs, medianMs, factor: Math.max(1, Math.round((medianMs / REFERENCE_ROUND_MS) * 100) / 100) };
}
