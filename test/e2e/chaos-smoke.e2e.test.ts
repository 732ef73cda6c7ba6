/**
 * The chaos smoke: `npm run chaos` for 1.5 minutes, faults at least 5 s apart (the soak's plan
 * spaces them 8 s), with 3 real instance processes on a persisted
 * Azurite behind the fault proxies, every fault kind at least once (kill -9, a bare SIGTERM, a
 * drain that aborts a running invocation, SIGSTOP of the leader past its lease, an Azurite
 * restart, proxy faults, a lease broken from outside, a run record unavailable, a worker dying
 * between sending its result and deleting its message, a hung hook, the lease blob or its
 * container deleted), then the invariant checker over every
 * run, with the audit trail taken off the wire. The kinds a plan has once take half a minute or
 * more each: the two deploy kinds (a rolling deploy, every timer frozen) are left to their own
 * e2e tests (`rolling-deploy`, `frozen-timer`) and to the soak, and a straggler (a worker stopped
 * for 25-30 s) to the soak.
 */
import { afterAll, describe, expect, it, onTestFailed } from 'vitest';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { FAULT_KINDS, ONCE_PER_PLAN, type FaultKind } from '../../chaos/fault-plan';

const SMOKE_KINDS = FAULT_KINDS.filter((kind): kind is FaultKind => !ONCE_PER_PLAN.includes(kind));
import type { SoakReport } from '../../chaos/soak';
import { instanceLogDir, killAllSpawned, markDistInUse, projectRoot, spawnTracked } from '../support/cluster-process';
import { patience, slowdown } from '../support/slowdown';

const release = markDistInUse();
afterAll(async () => {
  await killAllSpawned();
  release();
});

/** This run must have fencing on, whatever the shell says. */
function withoutFencingSwitch(): NodeJS.ProcessEnv {
  const env = { ...process.env };
  delete env.BATON_UNSAFE_DISABLE_FENCING;
  return env;
}

/**
 * For a violation, the instance log lines that tell its story: the faults, every leadership
 * change and each line naming a violating run. CI keeps only the end of a failed run's output,
 * where the assertion message is, so the story goes there rather than in a dump above it.
 */
function violationContext(report: SoakReport, data: string): string {
  if (report.check.violations.length === 0) return 'no violation';
  const runs = report.check.violations.map((v) => v.subject.replace(/ at /, '/'));
  let lines: string[] = [];
  try {
    lines = readFileSync(join(data, 'instances.log'), 'utf8').split('\n');
  } catch (err) {
    return `(no instances.log: ${String(err)})`;
  }
  const telling = lines.filter(
    (line) =>
      / fault: | leadership (acquired|lost) | started \(pid | exited /.test(line) || runs.some((run) => line.includes(run)),
  );
  const shown = telling.length > 80 ? [...telling.slice(0, 40), '…', ...telling.slice(-40)] : telling;
  return `the violations, and the instance log lines about them:\n${shown.map((l) => l.slice(0, 240)).join('\n')}\n`;
}

describe('the chaos smoke', () => {
  it(
    'injects every fault kind but those a plan has once into a 3-instance cluster and finds no violation',
    { timeout: patience(360_000) },
    async () => {
      // --data keeps the soak's folder, instances.log included, for the dump of a failure.
      const data = join(instanceLogDir(), 'soak');
      const chaos = spawnTracked(
        'chaos',
        process.execPath,
        [
          join(projectRoot, 'dist', 'chaos', 'main.js'),
          ...['--minutes', '1.5', '--min-gap-seconds', '5', '--instances', '3', '--seed', '63', '--json', '--data', data],
          ...['--slowdown', String(slowdown())],
          ...['--faults', SMOKE_KINDS.join(',')],
        ],
        withoutFencingSwitch(),
        data,
      );
      onTestFailed(() => void process.stderr.write(`\n${chaos.dump()}\n`));
      const exit = await chaos.waitExit(330_000);
      const report = JSON.parse(chaos.lines.map((l) => l.text).join('\n')) as SoakReport;

      for (const kind of SMOKE_KINDS) expect(report.faults[kind], kind).toBeGreaterThanOrEqual(1);
      expect(report.check.violations, violationContext(report, data)).toEqual([]);
      expect(exit.code).toBe(0);
      // Runs of both test jobs, each one checked to the item.
      expect(report.check.runsChecked).toBeGreaterThanOrEqual(3);
      expect(report.check.states.succeeded ?? 0).toBeGreaterThanOrEqual(2);
      // The faults did bite: leadership moved, the proxy disturbed requests, storage refused stale writes or restarts.
      expect(report.leaderChanges).toBeGreaterThanOrEqual(3);
      expect(
        report.proxy.unavailable + report.proxy.resetBefore + report.proxy.resetAfter + report.proxy.latency,
      ).toBeGreaterThan(0);
      expect(report.proxy.refused).toBeGreaterThan(0);
      expect(report.check.audit?.accepted).toBeGreaterThan(20);
      // The aimed faults hit something: a record was refused, a worker died after sending, a hook
      // hung in a run that started, and the lease record was deleted under a leader.
      expect(report.proxy.outage).toBeGreaterThan(0);
      const kinds = report.targets.map((t) => t.kind);
      expect(kinds).toContain('worker-death');
      expect(kinds).toContain('lease-delete');
      const hung = report.targets.flatMap((t) => (t.kind === 'hung-hook' && t.started ? [t.run] : []));
      expect(hung.length).toBeGreaterThanOrEqual(1);
      for (const run of hung) expect(report.targetRuns[run], run).toBeDefined();
      // A bare SIGTERM ran Baton's own stop (the signal path, no hook) and the signal then ended
      // the process, before the host's kill.
      const sigterms = report.stops.filter((s) => s.kind === 'sigterm');
      expect(sigterms.length).toBeGreaterThanOrEqual(1);
      for (const stop of sigterms) {
        expect(stop.stop?.path, stop.instance).toBe('signal');
        expect(stop.exit?.signal, stop.instance).toBe('SIGTERM');
      }
      // A drain aborted a running invocation, and its message came back while its code ran on.
      const drains = report.targets.flatMap((t) => (t.kind === 'drain-abort' ? [t] : []));
      expect(drains.length).toBeGreaterThanOrEqual(1);
      expect(drains.some((d) => d.aborted > 0 && d.messages.some((m) => m.ranOn))).toBe(true);
      // Every burst of triggers with one key named one run, which ran as its job's runs must.
      const keyed = report.targets.flatMap((t) => (t.kind === 'keyed-trigger' ? [t] : []));
      expect(keyed.length).toBeGreaterThanOrEqual(1);
      for (const { key, runs } of keyed) {
        expect(runs, key).toHaveLength(1);
        expect(report.targetRuns[runs[0]!]?.state, key).toBe('succeeded');
      }
    },
  );
});
