import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { bicepBuild, bicepLint, describeDiagnostics } from '../support/bicep-cli';

// The real Bicep compiler, restored from NuGet: what it refuses, `azd up` would refuse too, and
// what it warns about (a property the resource type does not have, an API version it knows no
// types for) is a deploy that fails or quietly does less than the file says. So every
// diagnostic fails the build here, warnings included.

const root = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
const main = join(root, 'infra', 'main.bicep');
const scratch: string[] = [];

afterAll(() => {
  for (const dir of scratch) rmSync(dir, { recursive: true, force: true });
});

/** A copy of infra/ (bicepconfig.json comes along) with some files changed; returns its folder. */
function brokenCopy(edits: readonly { file: string; from: string; to: string }[]): string {
  const dir = mkdtempSync(join(tmpdir(), 'baton-infra-'));
  scratch.push(dir);
  cpSync(join(root, 'infra'), dir, { recursive: true });
  for (const { file, from, to } of edits) {
    const path = join(dir, file);
    const text = readFileSync(path, 'utf8');
    if (!text.includes(from)) throw new Error(`${file} has no ${from} to break`);
    writeFileSync(path, text.replace(from, to));
  }
  return dir;
}

describe('the infra under the real Bicep compiler', () => {
  it('builds infra/main.bicep with no error and no warning', async () => {
    const { stdout, diagnostics, exitCode } = await bicepBuild(main);
    expect(describeDiagnostics(diagnostics, root)).toBe('');
    expect(exitCode).toBe(0);
    const template = JSON.parse(stdout) as { $schema: string; resources: unknown };
    expect(template.$schema).toMatch(/subscriptionDeploymentTemplate\.json#$/);
  });

  it('lints every file with no finding, under the project bicepconfig.json', async () => {
    const { diagnostics, exitCode } = await bicepLint(join(root, 'infra'));
    expect(describeDiagnostics(diagnostics, root)).toBe('');
    expect(exitCode).toBe(0);
  });

  // One build of a copy with both breaks: each compile costs seconds of CPU.
  it('fails a misspelt property and an API version it has no types for', async () => {
    const copy = brokenCopy([
      { file: 'modules/storage.bicep', from: 'allowSharedKeyAccess: false', to: 'allowSharedKeyAcess: false' },
      { file: 'modules/function-app.bicep', from: "'Microsoft.Web/sites@2025-03-01'", to: "'Microsoft.Web/sites@2025-13-01'" },
    ]);
    const { diagnostics } = await bicepBuild(join(copy, 'main.bicep'));
    const listed = describeDiagnostics(diagnostics, copy);
    // BCP037 (not allowed), or BCP089 when the compiler also suggests the right name.
    expect(listed).toMatch(/^modules\/storage\.bicep:\d+ BCP0(37|89): .*allowSharedKeyAcess/m);
    expect(listed).toMatch(/^modules\/function-app\.bicep:\d+ BCP081: .*Microsoft\.Web\/sites@2025-13-01/m);
  });

  it('fails a finding of the linter', async () => {
    const copy = brokenCopy([
      { file: 'modules/storage.bicep', from: 'param containerNames string[]', to: 'param containerNames array' },
    ]);
    const { diagnostics } = await bicepLint(copy);
    expect(diagnostics.map((d) => `${d.rule} ${d.file.slice(copy.length + 1)}`)).toContain(
      'use-user-defined-types modules/storage.bicep',
    );
  });
});
