/**
 * Baton as a user meets it: installed from its package into a Functions app of their own.
 * `npm pack` makes the tarball; a fresh app in a temporary folder (its own package.json naming
 * the tarball and `@azure/functions`, its own host.json, tsconfig.json, one job and one unit
 * test, all written here, none copied from this repository) installs it, builds with `tsc`,
 * runs `npx baton start --once --job word-lengths` and its unit test through the testing entry,
 * on the Node running the suite (22, which Flex Consumption runs) and on Node 24.
 *
 * It installs as a user does on the day: no lockfile, the registry's current versions in the
 * ranges the app names, and the TypeScript npm gives today (`latest`), built with the tsconfig
 * the README shows. A warning from npm that an engine or a peer dependency does not fit fails it:
 * that is what a user would see first.
 *
 * The app's tsconfig checks library types (no skipLibCheck), so a public type that names a
 * package a consumer need not install (the optional durable-functions peer) fails here. Its
 * job's schema comes from the app's own zod 3, not Baton's zod 4. Deployed with production
 * dependencies only, the app has no Application Insights exporter (an optional peer), so its
 * connection string must stop it with a line naming the setting and the package.
 */
import { execFile } from 'node:child_process';
import { cpSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { delimiter, dirname, join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { markDistInUse, projectRoot } from '../support/cluster-process';
import { patience } from '../support/slowdown';
import { ensureNode, NODE24_VERSION } from '../support/node-binary.mjs';

const work = mkdtempSync(join(tmpdir(), 'baton-consumer-e2e-'));
const app = join(work, 'inventory-app');
const timings: string[] = [];
const npm = process.platform === 'win32' ? 'npm.cmd' : 'npm';
const npx = process.platform === 'win32' ? 'npx.cmd' : 'npx';
const version = (JSON.parse(readFileSync(join(projectRoot, 'package.json'), 'utf8')) as { version: string }).version;

afterAll(() => {
  rmSync(work, { recursive: true, force: true });
  if (timings.length) console.log(`consumer e2e timings:\n  ${timings.join('\n  ')}`);
});

interface Ran {
  code: number | null;
  out: string;
  err: string;
}

/** `command args` in the app's folder (or `cwd`), its output kept; with `node`, that Node first on PATH; `env` added. */
function run(
  label: string,
  command: string,
  args: string[],
  options: { node?: string; cwd?: string; env?: NodeJS.ProcessEnv; timeoutMs: number },
): Promise<Ran> {
  const started = Date.now();
  const env: NodeJS.ProcessEnv = {
    ...process.env,
    PATH: `${dirname(options.node ?? process.execPath)}${delimiter}${process.env.PATH ?? ''}`,
  };
  // The suite's own settings must not leak into the app: it has its own local.settings.json.
  for (const name of Object.keys(env)) if (name.startsWith('BATON_') && name !== 'BATON_TEST_SLOWDOWN') delete env[name];
  Object.assign(env, options.env);
  return new Promise((resolve) => {
    execFile(
      command,
      args,
      { cwd: options.cwd ?? app, env, timeout: options.timeoutMs, maxBuffer: 16 * 1024 * 1024 },
      (error, out, err) => {
        timings.push(`${label}: ${Date.now() - started} ms`);
        resolve({ code: error ? ((error as { code?: number }).code ?? null) : 0, out, err });
      },
    );
  });
}

function expectOk(ran: Ran): void {
  expect(ran.code, `stdout:\n${ran.out}\nstderr:\n${ran.err}`).toBe(0);
}

function writeApp(tarball: string): void {
  const file = (path: string, text: string) => {
    mkdirSync(dirname(join(app, path)), { recursive: true });
    writeFileSync(join(app, path), text);
  };
  file(
    'package.json',
    JSON.stringify(
      {
        name: 'inventory-app',
        version: '1.0.0',
        private: true,
        main: 'dist/src/index.js',
        scripts: { build: 'tsc', test: 'node --test dist/test/word-lengths.test.js' },
        dependencies: { '@azure/functions': '^4.16.0', 'baton-functions': `file:${tarball}`, zod: '^3.25.0' },
        devDependencies: { '@types/node': '^22.0.0', azurite: '^3.37.0', typescript: 'latest' },
      },
      null,
      2,
    ),
  );
  file(
    'host.json',
    JSON.stringify({
      version: '2.0',
      extensions: {
        queues: { maxDequeueCount: 5, messageEncoding: 'none', visibilityTimeout: '00:00:05', maxPollingInterval: '00:00:02' },
      },
    }),
  );
  file(
    'local.settings.json',
    JSON.stringify({
      IsEncrypted: false,
      Values: { FUNCTIONS_WORKER_RUNTIME: 'node', AzureWebJobsStorage: 'UseDevelopmentStorage=true' },
    }),
  );
  // The README's tsconfig, word for word.
  file('tsconfig.json', readmeTsconfig());
  file(
    'src/jobs/word-lengths.ts',
    `import { defineJob } from 'baton-functions';
import { z } from 'zod';

const WORDS = ['baton', 'passes', 'between', 'runners', 'safely', 'twice'];

export const wordLengths = defineJob({
  name: 'word-lengths',
  schedule: '0 0 3 * * *',
  itemSchema: z.object({ word: z.string().min(1) }),
  async *split() {
    for (const word of WORDS) yield { word };
  },
  async process(item) {
    return { letters: item.word.length };
  },
  aggregate: {
    initial: () => ({ words: 0, letters: 0, longest: 0 }),
    add: (acc, r: { letters: number }) => ({
      words: acc.words + 1,
      letters: acc.letters + r.letters,
      longest: Math.max(acc.longest, r.letters),
    }),
  },
});
`,
  );
  file(
    'src/index.ts',
    `import { app } from '@azure/functions';
import { registerBaton } from 'baton-functions/functions';
import { wordLengths } from './jobs/word-lengths';

console.log(\`inventory-app on Node \${process.version}\`);
registerBaton(app, { jobs: [wordLengths] });
`,
  );
  file(
    'test/word-lengths.test.ts',
    `import { test } from 'node:test';
import assert from 'node:assert/strict';
import { runJobOnce } from 'baton-functions/testing';
import { wordLengths } from '../src/jobs/word-lengths';

test(\`word-lengths counts every word once, on Node \${process.version}\`, async () => {
  const run = await runJobOnce(wordLengths);
  assert.equal(run.state, 'succeeded');
  assert.deepEqual(run.output, { words: 6, letters: 36, longest: 7 });
  assert.deepEqual(run.failures, []);
});
`,
  );
}

/** The tsconfig.json the README's first job shows, so a user who copies it gets what this test builds. */
function readmeTsconfig(): string {
  const readme = readFileSync(join(projectRoot, 'README.md'), 'utf8');
  const block = /```jsonc?\n\/\/ tsconfig\.json\n([\s\S]*?)```/.exec(readme);
  if (!block?.[1]) throw new Error('README.md shows no tsconfig.json block (```json, first line // tsconfig.json)');
  JSON.parse(block[1]);
  return block[1];
}

/** npm's warnings that say an engine or a peer dependency does not fit what was installed. */
function misfits(stderr: string): string[] {
  return stderr.split('\n').filter((line) => /^npm warn (EBADENGINE|ERESOLVE)|peer dep|unmet peer/i.test(line));
}

const EXACT = { words: 6, letters: 36, longest: 7 };
let node24: string;
let installWarnings: string[] = [];
let tscVersion = '';

beforeAll(async () => {
  node24 = ensureNode(NODE24_VERSION);
  // npm pack reads dist/: held against the rebuild the README's npm start makes in another file.
  const release = markDistInUse();
  let packed: Ran;
  try {
    packed = await run('npm pack', npm, ['pack', '--pack-destination', work], { cwd: projectRoot, timeoutMs: patience(60_000) });
  } finally {
    release();
  }
  expectOk(packed);
  const tarball = join(work, `baton-functions-${version}.tgz`);
  writeApp(tarball);
  // As a user installs on the day: the registry's current versions (npm revalidates what it has
  // cached), no lockfile.
  const installed = await run('npm install', npm, ['install', '--no-audit', '--no-fund'], { timeoutMs: patience(240_000) });
  expectOk(installed);
  installWarnings = misfits(installed.err);
  tscVersion = (await run('tsc --version', npx, ['tsc', '--version'], { timeoutMs: patience(60_000) })).out.trim();
  expectOk(await run('tsc', npx, ['tsc'], { timeoutMs: patience(120_000) }));
}, patience(420_000));

describe('a Functions app of its own that installs the package', () => {
  const nodes = (): [string, string | undefined, string][] => [
    [`Node ${process.version}`, undefined, process.version],
    [`Node ${NODE24_VERSION}`, node24, `v${NODE24_VERSION}`],
  ];

  it("installs with today's versions and no warning that an engine or a peer does not fit", () => {
    expect(installWarnings).toEqual([]);
    // The TypeScript of the day, whatever its major: today 7, whose `types` default is empty.
    expect(tscVersion).toMatch(/^Version \d+\./);
    const installedTs = JSON.parse(readFileSync(join(app, 'node_modules', 'typescript', 'package.json'), 'utf8')) as {
      version: string;
    };
    timings.push(`TypeScript ${installedTs.version}`);
  });

  it(
    'npx baton start --once --job word-lengths runs its job on two instances, with the exact output',
    { timeout: patience(240_000) },
    async () => {
      for (const [label, node, expected] of nodes()) {
        const output = join(work, `run-${expected}.json`);
        const ran = await run(
          `baton start --once (${label})`,
          npx,
          ['baton', 'start', '--once', '--job', 'word-lengths', '--instances', '2', '--port', '0', '--output', output],
          { ...(node ? { node } : {}), timeoutMs: patience(120_000) },
        );
        expectOk(ran);
        // The app's own line, from the CLI's look at the app and from each instance.
        expect(ran.out, label).toContain(`inventory-app on Node ${expected}`);
        expect(ran.out, label).toMatch(/instance-1: inventory-app on Node/);
        const { record, output: doc } = JSON.parse(readFileSync(output, 'utf8')) as {
          record: { state: string; counters: Record<string, number> };
          output: { output: unknown };
        };
        expect(record.state, label).toBe('succeeded');
        expect(record.counters, label).toMatchObject({ planned: 6, succeeded: 6, failed: 0, duplicates: 0 });
        expect(doc.output, label).toEqual(EXACT);
      }
    },
  );

  it(
    'deployed without the optional Application Insights exporter, its connection string stops the app with a line naming both',
    { timeout: patience(180_000) },
    async () => {
      // What a deploy ships: production dependencies only. (In the app's own folder the exporter is
      // there all the same: Azurite, a dev dependency, brings it through applicationinsights.)
      const deployed = join(work, 'deployed');
      mkdirSync(deployed, { recursive: true });
      cpSync(join(app, 'dist'), join(deployed, 'dist'), { recursive: true });
      cpSync(join(app, 'host.json'), join(deployed, 'host.json'));
      const manifest = JSON.parse(readFileSync(join(app, 'package.json'), 'utf8')) as Record<string, unknown>;
      delete manifest.devDependencies;
      writeFileSync(join(deployed, 'package.json'), JSON.stringify(manifest, null, 2));
      expectOk(
        await run('npm install --omit=dev', npm, ['install', '--omit=dev', '--prefer-offline', '--no-audit', '--no-fund'], {
          cwd: deployed,
          timeoutMs: patience(120_000),
        }),
      );
      const ran = await run('the deployed app with App Insights set', process.execPath, ['dist/src/index.js'], {
        cwd: deployed,
        env: {
          AzureWebJobsStorage: 'UseDevelopmentStorage=true',
          APPLICATIONINSIGHTS_CONNECTION_STRING: 'InstrumentationKey=00000000-0000-0000-0000-000000000000',
        },
        timeoutMs: patience(30_000),
      });
      expect(ran.code, ran.out).toBe(1);
      expect(ran.err).toContain(
        'InvalidSettingError: APPLICATIONINSIGHTS_CONNECTION_STRING is set, and @azure/monitor-opentelemetry is not installed: npm install @azure/monitor-opentelemetry (Baton sends its metrics and events to Application Insights through it)\n',
      );
    },
  );

  it('its unit test runs the job once through the testing entry', { timeout: patience(120_000) }, async () => {
    for (const [label, node, expected] of nodes()) {
      const ran = await run(
        `node --test (${label})`,
        node ?? process.execPath,
        ['--test', '--test-reporter=tap', 'dist/test/word-lengths.test.js'],
        {
          timeoutMs: patience(60_000),
        },
      );
      expectOk(ran);
      expect(ran.out, label).toContain(`ok 1 - word-lengths counts every word once, on Node ${expected}`);
    }
  });
});
