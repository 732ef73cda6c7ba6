import { relative } from 'node:path';
import { defineConfig } from 'vitest/config';
import { BaseSequencer, type TestSpecification } from 'vitest/node';
import { calibrate, parseSlowdown, REFERENCE_ROUND_MS, SLOWDOWN_ENV } from './test/support/calibration.mjs';

/**
 * The order the long files start in, in each group. Within a group the files share four workers,
 * so a long file that starts last makes the whole group late, and four files that mostly wait
 * leave the two cores idle; vitest orders by its cache of past durations, which a fresh CI clone
 * does not have (it then starts the largest files first, which are not the longest). Files not
 * named here follow, as vitest orders them.
 */
const START_ORDER = [
  // The first group. Half of its long files mostly wait (on 15 s leases, on ticks) and half keep
  // a core busy; when four waiting files started together, the two cores idled for most of a
  // minute. So the long ones alternate, waiting and busy, longest first in each kind (durations
  // and CPU from a fresh CI clone). The clusters of real processes (frozen-timer,
  // rolling-deploy) run here: the last group is bound by the chaos smoke. The type-check and lint
  // of every file is one process that keeps a core busy for half a minute or more: it starts first.
  'test/integration/typecheck-lint.test.ts',
  'test/integration/leader-election.azurite.test.ts',
  'test/integration/bad-config-exit.test.ts',
  'test/integration/malformed-input.azurite.test.ts',
  'test/integration/engine.azurite.test.ts',
  'test/integration/frozen-timer.test.ts',
  'test/integration/engine-edges.azurite.test.ts',
  'test/integration/clock-skew.azurite.test.ts',
  'test/integration/blob-audit.azurite.test.ts',
  'test/integration/local-host.azurite.test.ts',
  'test/integration/cli.azurite.test.ts',
  'test/integration/rolling-deploy.test.ts',
  'test/integration/engine-failover.azurite.test.ts',
  'test/contract/lease-store.azurite.test.ts',
  'test/unit/durable/durable-orchestrator.test.ts',
  'test/unit/engine/engine-robustness.test.ts',
  'test/integration/coordinator-tick.azurite.test.ts',
  'test/integration/metrics.azurite.test.ts',
  'test/integration/functions-app.azurite.test.ts',
  'test/contract/queue.azurite.test.ts',
  'test/unit/engine/hung-hooks.test.ts',
  'test/integration/epoch-reset.azurite.test.ts',
  // The second group, longest first, so that the last files to start are short and the group
  // does not end on one file with the cores idle. Durations include each file's beforeAll: the
  // consumer's npm install and tsc make it the second longest. Within that order, files that
  // mostly wait (the soaks, the leadership smoke, failover's lease expiries) sit between those
  // that keep a core busy (clusters, installs, the throughput smoke).
  'test/e2e/chaos-smoke.e2e.test.ts',
  'test/e2e/consumer-app.e2e.test.ts',
  'test/e2e/bench-smoke-throughput.e2e.test.ts',
  'test/e2e/bench-smoke.e2e.test.ts',
  'test/e2e/bench-smoke-leadership.e2e.test.ts',
  'test/e2e/cluster.e2e.test.ts',
  'test/e2e/chaos-broken.e2e.test.ts',
  'test/e2e/cluster-kill-leader.e2e.test.ts',
  'test/e2e/failover.e2e.test.ts',
  'test/e2e/scale-failover.e2e.test.ts',
  'test/e2e/cluster-running.e2e.test.ts',
  'test/e2e/no-secrets.e2e.test.ts',
];

class StartOrder extends BaseSequencer {
  override async sort(files: TestSpecification[]): Promise<TestSpecification[]> {
    const sorted = await super.sort(files);
    const rank = (file: TestSpecification) => {
      const at = START_ORDER.indexOf(relative(this.ctx.config.root, file.moduleId).split('\\').join('/'));
      return at < 0 ? START_ORDER.length : at;
    };
    const group = (file: TestSpecification) => file.project.config.sequence.groupOrder;
    // Stable: groups keep their order, and unnamed files keep vitest's.
    return sorted
      .map((file, index) => ({ file, index }))
      .sort((a, b) => group(a.file) - group(b.file) || rank(a.file) - rank(b.file) || a.index - b.index)
      .map(({ file }) => file);
  }
}

/**
 * Files that change what other files in the same process would see: a module mock
 * (`vi.mock`), stubbed environment variables, or OpenTelemetry's process-wide providers. They
 * run each in a fresh process; every other file shares its worker's process with the files
 * before it, so the SDKs, Azurite and Baton's own modules are loaded once per worker and not
 * once per file (that loading was most of the suite's import time).
 */
const OWN_PROCESS = [
  'test/unit/app/security-registrations.test.ts',
  'test/unit/telemetry/metrics.test.ts',
  'test/support/env-knob.test.ts',
  'test/integration/metrics.azurite.test.ts',
  'test/integration/register-functions.azurite.test.ts',
  // Installs the local host's @azure/functions-core, which @azure/functions looks up once per process.
  'test/unit/local/app-functions.test.ts',
];

/**
 * Tests of the project's own tools, each beside the code it tests (test/unit/ holds the library's,
 * a folder for each room of src/). They run with the unit files. Only bench/lib/ holds tests in
 * bench/: bench/run.ts runs every file of bench/benchmarks/ as a benchmark.
 */
const BESIDE_TOOLS = ['bench/**/*.test.ts', 'chaos/**/*.test.ts', 'infra/**/*.test.ts', '.ci/**/*.test.ts'];

/**
 * How much slower this machine is, now, than the one the suite's caps were set on: every cap on a
 * wait is multiplied by it (test/support/slowdown.ts). It is measured here, once, before any
 * worker starts, and handed on through BATON_TEST_SLOWDOWN, which the workers and everything they
 * spawn inherit; set that variable to skip the measurement.
 */
const given = process.env[SLOWDOWN_ENV];
const slowdown = given
  ? parseSlowdown(given)
  : await calibrate().then(({ factor, roundsMs }) => {
      console.log(
        `slowdown ${factor}: calibration rounds ${roundsMs.map(Math.round).join(', ')} ms, reference ${REFERENCE_ROUND_MS} ms`,
      );
      return factor;
    });
process.env[SLOWDOWN_ENV] = String(slowdown);

// Two groups, run one after the other. The end-to-end files time real processes (SIGKILL and
// SIGSTOP failover, a running cluster polled by the CLI) against an Azurite that shares the
// cores with them; beside the heavy integration files on a 2-core machine they starved for
// seconds at a time, so they run on their own, after everything else.
export default defineConfig({
  test: {
    // Lease tests wait on real 15 s Azure leases; they mostly sleep, so files run side by side.
    testTimeout: Math.round(120_000 * slowdown),
    hookTimeout: Math.round(60_000 * slowdown),
    fileParallelism: true,
    sequence: { sequencer: StartOrder },
    maxWorkers: 4,
    reporters: ['default'],
    projects: [
      {
        extends: true,
        test: {
          name: 'suite',
          include: ['test/**/*.test.ts', ...BESIDE_TOOLS],
          exclude: ['test/e2e/**', ...OWN_PROCESS],
          isolate: false,
          sequence: { groupOrder: 0 },
        },
      },
      {
        extends: true,
        test: { name: 'own-process', include: OWN_PROCESS, isolate: true, sequence: { groupOrder: 0 } },
      },
      {
        // Clusters of real processes: the failover e2e files (SIGKILL, SIGSTOP), the README's
        // command, each benchmark small and the chaos soaks. Beside the heavy integration files
        // the timed ones starved for seconds at a time on two cores, so they run after them.
        // Their bounds are loose (a failover within twice the lease, a stop within 10 s), and the
        // chaos smoke, the longest file, would otherwise leave three workers idle for a minute.
        extends: true,
        test: { name: 'e2e', include: ['test/e2e/**/*.test.ts'], isolate: false, sequence: { groupOrder: 1 } },
      },
    ],
  },
});
