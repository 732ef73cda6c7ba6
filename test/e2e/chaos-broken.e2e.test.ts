/**
 * The soak must be able to catch something. With fencing turned off in the instances
 * (`BATON_UNSAFE_DISABLE_FENCING=1`, set only here), a leader whose lease was broken keeps
 * overwriting its successor's run records until its next renewal fails; the checker must see
 * those stale writes in the audit trail and the soak must exit non-zero. Six breaks are planned
 * 5 s apart (five must land), and the check runs as the faults end (`--settle-seconds 0`): the
 * stale writes are in the audit trail by then, and nothing asserted here needs runs to settle.
 */
import { afterAll, describe, expect, it, onTestFailed } from 'vitest';
import { join } from 'node:path';
import type { SoakReport } from '../../chaos/soak';
import { instanceLogDir, killAllSpawned, markDistInUse, projectRoot, spawnTracked } from '../support/cluster-process';
import { patience, slowdown } from '../support/slowdown';

const release = markDistInUse();
afterAll(async () => {
  await killAllSpawned();
  release();
});

describe('the chaos soak against a build without fencing', () => {
  it('reports stale writes that storage accepted, and exits non-zero', { timeout: patience(300_000) }, async () => {
    // --data keeps the soak's folder, instances.log included, for the dump of a failure.
    const data = join(instanceLogDir(), 'soak');
    const chaos = spawnTracked(
      'chaos (fencing off)',
      process.execPath,
      [
        join(projectRoot, 'dist', 'chaos', 'main.js'),
        ...['--minutes', '0.5', '--min-gap-seconds', '5', '--instances', '3', '--seed', '8', '--faults', 'lease-break'],
        // The stale writes are in the audit trail as the faults end: no run needs to settle first.
        ...['--json', '--settle-seconds', '0'],
        ...['--slowdown', String(slowdown())],
        ...['--data', data],
      ],
      // Crash takeover off: its beats would tell a broken leader within 750 ms, leaving the
      // checker next to no stale write to catch; without them it writes on until its renewal.
      { ...process.env, BATON_UNSAFE_DISABLE_FENCING: '1', BATON_TAKEOVER_MS: '0' },
      data,
    );
    onTestFailed(() => void process.stderr.write(`\n${chaos.dump()}\n`));
    const exit = await chaos.waitExit(270_000);
    const report = JSON.parse(chaos.lines.map((l) => l.text).join('\n')) as SoakReport;

    expect(report.faults['lease-break']).toBeGreaterThanOrEqual(5);
    const staleWrites = report.check.violations.filter((v) => v.rule === 'epoch-order');
    expect(staleWrites.length).toBeGreaterThan(0);
    expect(staleWrites[0]?.evidence).toMatch(/^epoch \d+ .* accepted after epoch \d+/);
    expect(exit.code).toBe(1);
  });
});
