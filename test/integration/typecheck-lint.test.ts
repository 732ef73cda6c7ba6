/**
 * `npm run lint` inside the suite: the type-check of every file and the typed lint rules, over
 * one TypeScript program (`.ci/typecheck-lint.mjs`). It used to run before the first test, beside
 * the build: one core busy for most of a minute while the other, its build done, had nothing to
 * do. Here it is one more file of the first group and shares the cores with the rest. Its output
 * (every type error and lint problem) is the failure message.
 */
import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { projectRoot } from '../support/cluster-process';
import { patience } from '../support/slowdown';

interface Ran {
  code: number | null;
  output: string;
}

function typecheckLint(): Promise<Ran> {
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      [join(projectRoot, '.ci', 'typecheck-lint.mjs')],
      { cwd: projectRoot, maxBuffer: 64 * 1024 * 1024 },
      (error, stdout, stderr) => {
        const code = error ? ((error as { code?: number | string }).code ?? null) : 0;
        resolve({ code: typeof code === 'number' ? code : null, output: `${stdout}${stderr}` });
      },
    );
  });
}

describe('every TypeScript file of the repository', () => {
  it('type-checks, and passes the typed lint rules', { timeout: patience(300_000) }, async () => {
    const { code, output } = await typecheckLint();
    expect(output, 'npm run lint printed').toBe('');
    expect(code, output).toBe(0);
  });
});
