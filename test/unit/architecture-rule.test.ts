import { execFileSync } from 'node:child_process';
import { copyFileSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { projectRoot } from '../support/cluster-process';

/**
 * The architecture check (`npm run lint:arch`, this repository's .dependency-cruiser.cjs) run on
 * a small tree of its own: the reference app in functions/ may import the package's public
 * entries and nothing else of src/. The tree is built in a temporary folder, so the check sees
 * exactly the imports each case names.
 */
const work = mkdtempSync(join(tmpdir(), 'baton-arch-rule-'));
afterAll(() => rmSync(work, { recursive: true, force: true }));

let trees = 0;

function check(files: Record<string, string>): { code: number; out: string } {
  const dir = join(work, `tree-${++trees}`);
  const all: Record<string, string> = {
    'src/index.ts': "export { defineJob } from './jobs/define-job';\n",
    'src/functions.ts': 'export const registerBaton = (): void => {};\n',
    'src/jobs/define-job.ts': 'export const defineJob = (job: unknown): unknown => job;\n',
    'src/engine/coordinator.ts': 'export class Coordinator {}\n',
    ...files,
  };
  for (const [path, text] of Object.entries(all)) {
    mkdirSync(dirname(join(dir, path)), { recursive: true });
    writeFileSync(join(dir, path), text);
  }
  copyFileSync(join(projectRoot, '.dependency-cruiser.cjs'), join(dir, '.dependency-cruiser.cjs'));
  writeFileSync(join(dir, 'tsconfig.json'), JSON.stringify({ compilerOptions: { strict: true }, include: ['src', 'functions'] }));
  const bin = join(projectRoot, 'node_modules', 'dependency-cruiser', 'bin', 'dependency-cruiser.mjs');
  try {
    const out = execFileSync(process.execPath, [bin, 'src', 'functions', '--config', '.dependency-cruiser.cjs'], {
      cwd: dir,
      encoding: 'utf8',
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    return { code: 0, out };
  } catch (err) {
    const e = err as { status: number; stdout: string; stderr: string };
    return { code: e.status, out: `${e.stdout}${e.stderr}` };
  }
}

describe('the architecture check on the reference app', () => {
  it('passes an app that imports only the public entries', () => {
    const result = check({
      'functions/index.ts':
        "import { registerBaton } from '../src/functions';\nimport { defineJob } from '../src/index';\nregisterBaton();\ndefineJob({});\n",
    });
    expect(result.out).toContain('no dependency violations found');
    expect(result.code).toBe(0);
  });

  it('refuses an app that imports an internal module, naming the rule and the import', () => {
    const result = check({
      'functions/index.ts': "import { Coordinator } from '../src/engine/coordinator';\nnew Coordinator();\n",
    });
    expect(result.code).not.toBe(0);
    expect(result.out).toMatch(/error app-uses-public-entries: functions\/index\.ts → src\/engine\/coordinator\.ts/);
  });
});

describe('the architecture check on the lease room', () => {
  const room = {
    'functions/index.ts': "import { registerBaton } from '../src/functions';\nregisterBaton();\n",
    'src/lease/leader-elector.ts': "import { ActiveTerm } from './term';\nexport class LeaderElector { term = ActiveTerm; }\n",
  };

  it('passes an elector that imports the parts of its room', () => {
    const result = check({ ...room, 'src/lease/term.ts': 'export class ActiveTerm {}\n' });
    expect(result.out).toContain('no dependency violations found');
    expect(result.code).toBe(0);
  });

  it('refuses a part of the room that imports the elector, naming the rule and the import', () => {
    const result = check({
      ...room,
      'src/lease/term.ts':
        "import type { LeaderElector } from './leader-elector';\nexport class ActiveTerm { owner?: LeaderElector; }\n",
    });
    expect(result.code).not.toBe(0);
    expect(result.out).toMatch(/error elector-on-top-of-its-room: src\/lease\/term\.ts → src\/lease\/leader-elector\.ts/);
  });
});
