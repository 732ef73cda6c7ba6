import { spawn } from 'node:child_process';
import { chmodSync, existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import {
  DEFAULT_STRATEGY,
  SETTING,
  STRATEGIES,
  applySiteUpdateStrategy,
  findOnPath,
  strategyIn,
} from '../../infra/hooks/site-update-strategy.mjs';
import { parseSimpleYaml } from '../support/infra-lint';

// The site update strategy cannot be set from Bicep, so azd's postprovision hook sets it. These
// tests hold the hook, azure.yaml that runs it, and the pages that tell users which values it
// takes together, and run the real script against a fake `az` to see what it would ask Azure.
const root = join(__dirname, '..', '..');
const SCRIPT = 'infra/hooks/site-update-strategy.mjs';
const read = (path: string) => readFileSync(join(root, path), 'utf8');

/** A doc's section: from its heading to the next heading of the same or a higher level. */
function section(file: string, heading: string): string {
  const text = read(file);
  const start = text.indexOf(`\n${heading}\n`);
  if (start < 0) throw new Error(`${file} has no section ${heading}`);
  const level = heading.split(' ')[0] as string;
  const next = text.slice(start + heading.length + 2).search(new RegExp(`\\n#{1,${level.length}} `));
  return text.slice(start, next < 0 ? undefined : start + heading.length + 2 + next);
}

const backticked = (text: string) => [...text.matchAll(/`([^`]+)`/g)].map((m) => m[1] as string);

describe('the site update strategy hook, azure.yaml and the docs agree', () => {
  it('azure.yaml runs the script after provision (before deploy), on POSIX and on Windows', () => {
    const yaml = parseSimpleYaml(read('azure.yaml'));
    // Project-level: a service's hooks have no postprovision, and azd runs provision before deploy.
    expect(yaml.hooks).toEqual({
      postprovision: {
        posix: { shell: 'sh', run: `node ${SCRIPT}` },
        windows: { shell: 'pwsh', run: `node ${SCRIPT}` },
      },
    });
    expect(existsSync(join(root, SCRIPT))).toBe(true);
  });

  it('the script takes exactly the two strategies, Recreate by default', () => {
    expect(SETTING).toBe('BATON_SITE_UPDATE_STRATEGY');
    expect([...STRATEGIES]).toEqual(['Recreate', 'RollingUpdate']);
    expect(DEFAULT_STRATEGY).toBe('Recreate');
  });

  it("infra/README.md's settings table lists the value, its default and the allowed values", () => {
    const row = read('infra/README.md')
      .split('\n')
      .find((line) => line.startsWith(`| \`${SETTING}\` |`));
    expect(row, `infra/README.md has no settings row for ${SETTING}`).toBeDefined();
    const cells = (row as string).split('|').map((cell) => cell.trim());
    const defaultCell = cells[3] as string;
    // `<default>` (`<allowed>`, `<allowed>`), like the other rows with a fixed set of values.
    const [first, ...allowed] = backticked(defaultCell);
    expect(first).toBe(DEFAULT_STRATEGY);
    expect(allowed).toEqual([...STRATEGIES]);
  });

  it("docs/deploy.md's Deploys and the leader names the value, each strategy, the default and how to choose", () => {
    const text = section('docs/deploy.md', '## Deploys and the leader');
    expect(text).toContain(`\`${SETTING}\``);
    const listed = [...text.matchAll(/^- \*\*(\w+)\*\*/gm)].map((m) => m[1]);
    expect(listed).toEqual([...STRATEGIES]);
    expect(text).toMatch(new RegExp(`^- \\*\\*${DEFAULT_STRATEGY}\\*\\* \\(the default`, 'm'));
    for (const strategy of STRATEGIES.filter((s) => s !== DEFAULT_STRATEGY)) {
      expect(text).toContain(`azd env set ${SETTING} ${strategy}`);
    }
    // Why the default is Recreate: Microsoft's page on the preview.
    expect(text).toContain('https://learn.microsoft.com/azure/azure-functions/flex-consumption-site-updates');
  });

  it.each([
    ['a flat result', { type: 'RollingUpdate' }, 'RollingUpdate'],
    ['the strategy object', { siteUpdateStrategy: { type: 'Recreate' } }, 'Recreate'],
    [
      'the whole site (its own type is not the strategy)',
      { type: 'Microsoft.Web/sites', properties: { functionAppConfig: { siteUpdateStrategy: { type: 'RollingUpdate' } } } },
      'RollingUpdate',
    ],
    ['nothing', {}, undefined],
  ])('reads the type from %s', (_what, json, type) => {
    expect(strategyIn(json)).toBe(type);
  });
});

describe('the pieces azd does not reach on this machine', () => {
  it('finds az.cmd on a Windows PATH through PATHEXT', () => {
    const dir = mkdtempSync(join(tmpdir(), 'baton-site-update-path-'));
    try {
      writeFileSync(join(dir, 'az.cmd'), '');
      expect(findOnPath('az', { PATH: `C:\\nowhere;${dir}`, PATHEXT: '.EXE;.cmd' }, 'win32')).toBe(join(dir, 'az.cmd'));
      expect(findOnPath('az', { PATH: dir, PATHEXT: '.EXE' }, 'win32')).toBeUndefined();
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('names the signal when az is killed', () => {
    const env = { AZURE_FUNCTION_NAME: 'app', AZURE_RESOURCE_GROUP: 'rg' };
    const killed = () => ({ status: null, signal: 'SIGTERM', stdout: '', stderr: '' });
    expect(() => applySiteUpdateStrategy(env, killed)).toThrow(
      /config set was stopped by SIGTERM for app \(resource group rg\)$/,
    );
  });
});

// A fake `az` that appends its argv to a log, remembers what `set` set and prints it for `show`,
// unless told (FAKE_AZ_*) to print other JSON or to fail. It is a shell wrapper around Node so
// that it is an executable named `az` on PATH, as the real one is.
const FAKE_AZ = `
const { appendFileSync, existsSync, readFileSync, writeFileSync } = require('node:fs');
const args = process.argv.slice(2);
appendFileSync(process.env.FAKE_AZ_LOG, JSON.stringify(args) + '\\n');
const verb = args[3];
if (process.env.FAKE_AZ_FAIL === verb) {
  process.stderr.write(process.env.FAKE_AZ_STDERR ?? '');
  process.exit(1);
}
if (verb === 'set') writeFileSync(process.env.FAKE_AZ_STATE, args[args.indexOf('--type') + 1]);
if (verb === 'show') {
  const set = existsSync(process.env.FAKE_AZ_STATE) ? readFileSync(process.env.FAKE_AZ_STATE, 'utf8') : 'Recreate';
  process.stdout.write(process.env.FAKE_AZ_SHOW ?? JSON.stringify({ type: set }));
}
`;

interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
  /** Each invocation of the fake az, its arguments. */
  calls: string[][];
}

describe.skipIf(process.platform === 'win32')(`${SCRIPT}, run as azd runs it, against a fake az`, () => {
  const temps: string[] = [];
  afterEach(() => {
    for (const dir of temps.splice(0)) rmSync(dir, { recursive: true, force: true });
  });

  /** Runs the real script with only the given environment; PATH holds the fake az unless `az` is false. */
  function runHook(env: Record<string, string>, { az = true } = {}): Promise<Run> {
    const dir = mkdtempSync(join(tmpdir(), 'baton-site-update-'));
    temps.push(dir);
    const log = join(dir, 'az-calls.jsonl');
    if (az) {
      writeFileSync(join(dir, 'fake-az.cjs'), FAKE_AZ);
      writeFileSync(join(dir, 'az'), `#!/bin/sh\nexec '${process.execPath}' '${join(dir, 'fake-az.cjs')}' "$@"\n`);
      chmodSync(join(dir, 'az'), 0o755);
    }
    const childEnv = { PATH: dir, FAKE_AZ_LOG: log, FAKE_AZ_STATE: join(dir, 'state'), ...env };
    return new Promise((resolve, reject) => {
      const child = spawn(process.execPath, [join(root, SCRIPT)], { cwd: dir, env: childEnv, stdio: ['ignore', 'pipe', 'pipe'] });
      let stdout = '';
      let stderr = '';
      child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
      child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
      child.on('error', reject);
      child.on('close', (code) => {
        const calls = existsSync(log)
          ? readFileSync(log, 'utf8')
              .split('\n')
              .filter(Boolean)
              .map((line) => JSON.parse(line) as string[])
          : [];
        resolve({ code, stdout, stderr, calls });
      });
    });
  }

  const APP = { AZURE_FUNCTION_NAME: 'func-baton-abc', AZURE_RESOURCE_GROUP: 'rg-baton-dev' };
  const target = ['--name', 'func-baton-abc', '--resource-group', 'rg-baton-dev'];
  const setCall = (type: string, extra: string[] = []) => [
    'functionapp',
    'update-strategy',
    'config',
    'set',
    ...target,
    ...extra,
    '--type',
    type,
    '--only-show-errors',
    '--output',
    'none',
  ];
  const showCall = (extra: string[] = []) => [
    'functionapp',
    'update-strategy',
    'config',
    'show',
    ...target,
    ...extra,
    '--only-show-errors',
    '--output',
    'json',
  ];

  /** One line, ending in a newline, and nothing on the other stream. */
  function expectOneLine(run: Run, stream: 'stdout' | 'stderr') {
    const other = stream === 'stdout' ? 'stderr' : 'stdout';
    expect(run[other]).toBe('');
    expect(run[stream]).toMatch(/^[^\n]+\n$/);
    return run[stream];
  }

  const cases: {
    what: string;
    env: Record<string, string>;
    az?: boolean;
    ok: boolean;
    calls: string[][];
    says: (string | RegExp)[];
    never?: string[];
  }[] = [
    {
      what: 'unset: sets Recreate, then checks it',
      env: { ...APP },
      ok: true,
      calls: [setCall('Recreate'), showCall()],
      says: ['Recreate'],
    },
    {
      what: 'empty: the default too',
      env: { ...APP, BATON_SITE_UPDATE_STRATEGY: '' },
      ok: true,
      calls: [setCall('Recreate'), showCall()],
      says: ['Recreate'],
    },
    {
      what: "RollingUpdate, in azd's subscription, checked against the strategy object in another case",
      env: {
        ...APP,
        AZURE_SUBSCRIPTION_ID: '00000000-0000-0000-0000-000000000001',
        BATON_SITE_UPDATE_STRATEGY: 'RollingUpdate',
        FAKE_AZ_SHOW: '{"siteUpdateStrategy":{"type":"rollingupdate"}}',
      },
      ok: true,
      calls: [
        setCall('RollingUpdate', ['--subscription', '00000000-0000-0000-0000-000000000001']),
        showCall(['--subscription', '00000000-0000-0000-0000-000000000001']),
      ],
      says: ['RollingUpdate'],
    },
    {
      what: 'a value not allowed: names the setting and the values, asks az nothing',
      env: { ...APP, BATON_SITE_UPDATE_STRATEGY: 'rolling' },
      ok: false,
      calls: [],
      says: ['BATON_SITE_UPDATE_STRATEGY', 'rolling', 'Recreate', 'RollingUpdate'],
    },
    {
      what: 'no app name: names the output, asks az nothing',
      env: { AZURE_RESOURCE_GROUP: 'rg-baton-dev' },
      ok: false,
      calls: [],
      says: ['AZURE_FUNCTION_NAME'],
    },
    {
      what: 'no resource group: names the output, asks az nothing',
      env: { AZURE_FUNCTION_NAME: 'func-baton-abc' },
      ok: false,
      calls: [],
      says: ['AZURE_RESOURCE_GROUP'],
    },
    {
      what: 'show reports another strategy',
      env: { ...APP, BATON_SITE_UPDATE_STRATEGY: 'RollingUpdate', FAKE_AZ_SHOW: '{"type":"Recreate"}' },
      ok: false,
      calls: [setCall('RollingUpdate'), showCall()],
      says: ['RollingUpdate', /reports Recreate/],
    },
    {
      what: 'show reports no strategy at all',
      env: { ...APP, FAKE_AZ_SHOW: '{}' },
      ok: false,
      calls: [setCall('Recreate'), showCall()],
      says: ['Recreate'],
    },
    {
      what: 'show prints something other than JSON',
      env: { ...APP, FAKE_AZ_SHOW: 'not json' },
      ok: false,
      calls: [setCall('Recreate'), showCall()],
      says: ['JSON'],
    },
    {
      what: 'az fails: its last error line, and no token it printed',
      env: {
        ...APP,
        FAKE_AZ_FAIL: 'set',
        FAKE_AZ_STDERR:
          'WARNING: something\nERROR: (AuthorizationFailed) no access, token eyJ0eXAiOiJKV1QiLCJhbGciOiJSUzI1NiJ9.eyJhdWQiOiJ4In0.c2ln\n\n',
      },
      ok: false,
      calls: [setCall('Recreate')],
      says: ['AuthorizationFailed', 'exited with 1'],
      never: ['eyJ0eXAi', 'WARNING'],
    },
    {
      what: 'az fails on show',
      env: { ...APP, FAKE_AZ_FAIL: 'show', FAKE_AZ_STDERR: "ERROR: Please run 'az login' to setup account.\n" },
      ok: false,
      calls: [setCall('Recreate'), showCall()],
      says: ['az login'],
    },
    {
      what: 'az not on PATH',
      env: { ...APP },
      az: false,
      ok: false,
      calls: [],
      says: ['az', 'PATH', 'Azure CLI'],
    },
  ];

  it.each(cases)('$what', async ({ env, az, ok, calls, says, never = [] }) => {
    const run = await runHook(env, { az: az ?? true });
    expect(run.calls).toEqual(calls);
    if (ok) expect(run.code).toBe(0);
    else expect(run.code).not.toBe(0);
    const line = expectOneLine(run, ok ? 'stdout' : 'stderr');
    for (const said of says) expect(line).toMatch(said);
    for (const unsaid of never) expect(line).not.toContain(unsaid);
  });

  it('is idempotent: the same value twice sets and checks it twice, both succeed', async () => {
    // One Azure for both runs: the second finds the strategy the first set.
    const azure = mkdtempSync(join(tmpdir(), 'baton-site-update-state-'));
    temps.push(azure);
    const env = { ...APP, BATON_SITE_UPDATE_STRATEGY: 'RollingUpdate', FAKE_AZ_STATE: join(azure, 'state') };
    for (let i = 0; i < 2; i++) {
      const run = await runHook(env);
      expect(run.code).toBe(0);
      expect(run.calls).toEqual([setCall('RollingUpdate'), showCall()]);
      expectOneLine(run, 'stdout');
    }
  });
});
