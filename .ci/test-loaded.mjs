#!/usr/bin/env node
// The README's test command (`npm test`) on a busy machine: CPU-burning processes run beside it
// for the whole run and are stopped afterwards, whatever happens. CI's 2-core machine is often
// busy with other work, and a test that only an idle machine passes loses a landing there; this
// is how such a test is found before CI finds it.
//
//   npm run test:loaded                          one loaded run
//   npm run test:loaded -- --until-passes 3      repeat until 3 passes in a row (at most --max-runs)
//   npm run test:loaded -- --burners 3 --disk-burners 1 --logs .loaded
//   npm run test:loaded -- --slow-machine        a slower machine: the suite and one burner share CPU 0
//   npm run test:loaded -- --slow-machine 1      the same on CPU 1 (two such runs side by side, one a core)
//   npm run test:loaded -- --slow-machine test/e2e/failover.e2e.test.ts   only these files (vitest's filters)
//
// Each run's whole output goes to <logs>/run-N.log; the console gets each run's vitest summary,
// the names of the tests that failed and how long the run took. Exit 0 when the last run passed
// (and, with --until-passes, when the streak was reached).
import { spawn, spawnSync } from 'node:child_process';
import { createWriteStream, mkdirSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { Command } from 'commander';
import { wholeNumber } from './options.mjs';

const program = new Command('npm run test:loaded --')
  .description('npm test beside CPU-burning (and disk-writing) processes, stopped afterwards')
  .option('--burners <n>', 'CPU-burning processes beside the suite (default: 2, or 1 with --slow-machine)', wholeNumber(0))
  .option('--disk-burners <n>', 'processes writing and syncing to disk beside the suite', wholeNumber(0), 0)
  .option('--until-passes <n>', 'repeat until this many passes in a row', wholeNumber(1), 1)
  .option('--max-runs <n>', 'give up after this many runs (default: 3 x --until-passes, or 1)', wholeNumber(1))
  .option(
    '--slow-machine [cpu]',
    'stand in for a slower machine: the suite and every burner pinned to one CPU (taskset -c <cpu>, default 0)',
  )
  .option('--logs <dir>', "where each run's whole output goes", join('.ci', 'loaded-logs'))
  .argument('[filters...]', 'passed on to vitest: run only the files they match (default: all, as npm test)')
  .parse();
const filters = program.args;
const opts = program.opts();
const slowMachine = opts.slowMachine !== undefined;
const cpu = opts.slowMachine === true || opts.slowMachine === undefined ? '0' : opts.slowMachine;
if (!/^\d+$/.test(cpu)) program.error(`error: --slow-machine takes a CPU number, got "${cpu}"`);
const burnerCount = opts.burners ?? (slowMachine ? 1 : 2);
const diskBurnerCount = opts.diskBurners;
const wantedStreak = opts.untilPasses;
const maxRuns = opts.maxRuns ?? (wantedStreak === 1 ? 1 : wantedStreak * 3);
if (maxRuns < wantedStreak) program.error(`error: --max-runs ${maxRuns} is less than --until-passes ${wantedStreak}`);
// The slow-machine mode pins everything to one core: the suite then has half of one core where an
// idle 2-core machine gives it two (docs/testing.md says how much slower that measures).
const pin = slowMachine ? ['taskset', '-c', cpu] : [];
if (slowMachine && spawnSync('taskset', ['-c', cpu, 'true']).status !== 0)
  program.error(`error: --slow-machine needs taskset (util-linux) and a CPU ${cpu} it may use`);
const logDir = resolve(opts.logs);
mkdirSync(logDir, { recursive: true });

// A busy loop per burner, each in a session of its own, as other programs on the machine would
// be. Linux groups CPU time by session (sched_autogroup): burners sharing the harness's session
// would split one share among themselves, and eight would load the suite no more than one.
// Niceness is left at 0: the point is equal competition for the cores.
const BUSY = 'for (;;) { Math.sqrt(Math.random()); }';
// A disk burner writes and syncs 8 MiB at a time into a file of its own, as a package install
// beside the suite would: the chaos soaks and the build write to disk too.
const DISK = `const fs = require('node:fs'); const f = process.argv[1]; const b = Buffer.alloc(8 << 20, 1);
for (let i = 0; ; i++) { const fd = fs.openSync(f, i % 16 ? 'a' : 'w'); fs.writeSync(fd, b); fs.fsyncSync(fd); fs.closeSync(fd); }`;
const burners = [];
function startBurners() {
  const [command, ...args] = [...pin, process.execPath];
  for (let i = 0; i < burnerCount; i++) burners.push(spawn(command, [...args, '-e', BUSY], { stdio: 'ignore', detached: true }));
  for (let i = 0; i < diskBurnerCount; i++) {
    const file = join(logDir, `disk-burner-${i}.tmp`);
    burners.push(spawn(command, [...args, '-e', DISK, file], { stdio: 'ignore', detached: true }));
  }
}
/** SIGKILL to every burner; resolves once they have exited and the disk burners' files are gone. */
async function stopBurners() {
  const stopping = burners.splice(0).filter((b) => b.exitCode === null && b.signalCode === null);
  const exited = stopping.map((b) => new Promise((done) => b.once('exit', done)));
  for (const b of stopping) b.kill('SIGKILL');
  await Promise.all(exited);
  removeDiskFiles();
}
function removeDiskFiles() {
  for (let i = 0; i < diskBurnerCount; i++) rmSync(join(logDir, `disk-burner-${i}.tmp`), { force: true });
}

// Every process of a run carries this mark in its environment. The end-to-end tests start
// clusters in sessions of their own, out of reach of npm's process group, so what a run leaves
// behind (or what an interrupted run was running) is found by the mark and killed.
const MARK = `BATON_LOADED_RUN=${process.pid}`;
function killMarked() {
  let pids = [];
  try {
    pids = readdirSync('/proc').filter((name) => /^\d+$/.test(name) && Number(name) !== process.pid);
  } catch {
    return 0; // no /proc: nothing to look in
  }
  let killed = 0;
  for (const pid of pids) {
    try {
      if (!readFileSync(`/proc/${pid}/environ`, 'latin1').split('\0').includes(MARK)) continue;
      process.kill(Number(pid), 'SIGKILL');
      killed++;
    } catch {
      // gone already, or not ours to read
    }
  }
  return killed;
}

let current;
/** The synchronous way out, on a signal or at exit: everything this harness started, at once. */
function stopAllNow(signal) {
  for (const b of burners.splice(0)) if (b.exitCode === null && b.signalCode === null) b.kill('SIGKILL');
  if (current?.pid) {
    try {
      process.kill(-current.pid, 'SIGKILL');
    } catch {
      // already gone
    }
  }
  killMarked();
  removeDiskFiles();
  if (signal) process.exit(signal === 'error' ? 1 : 130);
}
process.on('exit', () => stopAllNow());
process.on('SIGINT', () => stopAllNow('SIGINT'));
process.on('SIGTERM', () => stopAllNow('SIGTERM'));

const ANSI = /\x1b\[[0-9;]*[A-Za-z]/g;

/** Runs `npm test` once, its output to `logPath`; resolves with the exit code and the plain output. */
function runSuite(logPath) {
  return new Promise((done) => {
    const log = createWriteStream(logPath);
    const chunks = [];
    const [name, value] = MARK.split('=');
    const [command, ...args] = [...pin, 'npm', 'test', ...(filters.length ? ['--', ...filters] : [])];
    current = spawn(command, args, {
      stdio: ['ignore', 'pipe', 'pipe'],
      detached: true,
      env: { ...process.env, [name]: value },
    });
    current.once('error', (err) => {
      console.error(`test-loaded: cannot run npm test: ${err.message}`);
      stopAllNow('error');
    });
    for (const stream of [current.stdout, current.stderr])
      stream.on('data', (chunk) => {
        log.write(chunk);
        chunks.push(chunk);
      });
    current.on('close', (code, signal) => {
      log.end();
      current = undefined;
      done({ code: code ?? (signal ? 128 : 1), text: Buffer.concat(chunks).toString('utf8').replace(ANSI, '') });
    });
  });
}

/** vitest's closing lines (Test Files, Tests, Duration...) and the names of the failed tests. */
function summarize(text) {
  const lines = text.split('\n');
  const start = lines.findLastIndex((l) => /^\s*Test Files\s/.test(l));
  const summary = start >= 0 ? lines.slice(start, start + 8).filter((l) => l.trim()) : ['(no vitest summary: see the log)'];
  const failed = [...new Set(lines.filter((l) => /^\s*(FAIL|×)\s/.test(l)).map((l) => l.trim()))];
  return { summary, failed };
}

const results = [];
let streak = 0;
for (let run = 1; run <= maxRuns && streak < wantedStreak; run++) {
  const logPath = join(logDir, `run-${run}.log`);
  const disk = diskBurnerCount ? ` and ${diskBurnerCount} disk-writing` : '';
  const where = slowMachine ? `, all pinned to CPU ${cpu}` : '';
  console.log(`test-loaded: run ${run}: npm test with ${burnerCount} busy${disk} processes beside it${where} (log: ${logPath})`);
  const started = Date.now();
  startBurners();
  const { code, text } = await runSuite(logPath);
  await stopBurners();
  const leftBehind = killMarked();
  if (leftBehind) console.log(`test-loaded: run ${run} left ${leftBehind} process(es) running; killed them`);
  const seconds = Math.round((Date.now() - started) / 1000);
  const { summary, failed } = summarize(text);
  for (const line of summary) console.log(`  ${line.trim()}`);
  for (const line of failed) console.log(`  failed: ${line}`);
  console.log(`test-loaded: run ${run} ${code === 0 ? 'passed' : `FAILED (exit ${code})`} in ${seconds} s`);
  streak = code === 0 ? streak + 1 : 0;
  results.push({ run, code, seconds, failed: failed.length });
}

const passed = results.filter((r) => r.code === 0).length;
console.log(
  `test-loaded: ${results.length} run(s), ${passed} passed, ${results.length - passed} failed; ` +
    `last streak ${streak} of ${wantedStreak} wanted; times ${results.map((r) => `${r.seconds} s`).join(', ')}`,
);
process.exit(streak >= wantedStreak ? 0 : 1);
