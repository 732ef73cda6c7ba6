import { spawnSync } from 'node:child_process';
import { chmodSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';

const GATE = resolve(__dirname, 'audit-gate.sh');
const bin = mkdtempSync(join(tmpdir(), 'baton-fake-npm-'));
afterAll(() => rmSync(bin, { recursive: true, force: true }));

/** Runs the gate with an `npm` on PATH that prints `output` and exits with `code`, as npm audit would. */
function gateWith(output: string, code: number): { status: number | null; stderr: string; stdout: string } {
  const npm = join(bin, 'npm');
  writeFileSync(npm, `#!/usr/bin/env bash\n[ "$1" = audit ] || exit 99\ncat <<'OUT'\n${output}\nOUT\nexit ${code}\n`);
  chmodSync(npm, 0o755);
  const run = spawnSync('bash', [GATE], { env: { ...process.env, PATH: `${bin}:${process.env.PATH}` }, encoding: 'utf8' });
  return { status: run.status, stderr: run.stderr, stdout: run.stdout };
}

describe('the CI audit gate', () => {
  it('fails on a high or critical advisory, and shows it', () => {
    const found = gateWith('axios  <1.8.2\nSeverity: high\n1 high severity vulnerability', 1);
    expect(found.status).toBe(1);
    expect(found.stdout).toContain('Severity: high');
  });

  it('passes when npm audit finds nothing at or above high', () => {
    expect(gateWith('found 0 vulnerabilities', 0).status).toBe(0);
  });

  it('passes, saying plainly that nothing was audited, when the advisory endpoint cannot be reached', () => {
    const unreachable = gateWith('npm warn audit 405 Method Not Allowed\nnpm error audit endpoint returned an error', 1);
    expect(unreachable.status).toBe(0);
    expect(unreachable.stderr).toMatch(/advisory endpoint could not be reached; production dependencies were NOT audited/);
  });

  it('fails on any other npm error', () => {
    expect(gateWith('npm error code ENOLOCK', 1).status).toBe(1);
  });
});
