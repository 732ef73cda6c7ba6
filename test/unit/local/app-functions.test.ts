import { mkdtempSync, mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { appEntries, loadFunctionsApp } from '../../../src/local/app-functions';

/**
 * The local host loads an app as the Functions host does: its package.json `main` runs against
 * `@azure/functions-core`, and what the app's own `@azure/functions` registered is what runs.
 * Each app here is a folder of plain JavaScript using this project's copy of the library, the
 * way a user's built app uses theirs. (Its own process: the stand-in core is process-wide.)
 */
const root = mkdtempSync(join(tmpdir(), 'baton-app-functions-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));

const FUNCTIONS = JSON.stringify(require.resolve('@azure/functions'));
let apps = 0;

/** A folder holding an app whose entry module is `source` (with `app` and `trigger` in scope). */
function appWith(source: string, manifest: Record<string, unknown> = { main: 'dist/index.js' }): string {
  const dir = join(root, `app-${++apps}`);
  mkdirSync(join(dir, 'dist'), { recursive: true });
  writeFileSync(join(dir, 'package.json'), JSON.stringify(manifest));
  writeFileSync(join(dir, 'dist', 'index.js'), `const { app, trigger, output } = require(${FUNCTIONS});\n${source}\n`);
  return dir;
}

const noLog = (): void => {};

describe('loading an app through @azure/functions-core', () => {
  it('turns timer, queue and http functions into the local host registrations, settings resolved', async () => {
    process.env.APP_FUNCTIONS_TEST_QUEUE = 'orders-in';
    const dir = appWith(`
      const seen = globalThis.appFunctionsTestSeen = [];
      app.timer('tick', { schedule: '*/5 * * * * *', handler: async () => 'ticked' });
      app.storageQueue('orders', { queueName: '%APP_FUNCTIONS_TEST_QUEUE%', connection: 'AzureWebJobsStorage', handler: async (m) => m });
      app.http('hello', { route: 'greet/{name}', methods: ['GET', 'PUT'], handler: async () => ({ body: 'hi' }) });
      app.http('plain', { handler: async () => ({ body: 'plain' }) });
      app.hook.appStart(() => { seen.push('start'); });
      app.hook.appTerminate(async () => { seen.push('terminate'); });
    `);
    const loaded = loadFunctionsApp(dir, noLog);
    expect(loaded.registrations.map(({ handler: _, ...rest }) => rest)).toEqual([
      { kind: 'timer', name: 'tick', schedule: '*/5 * * * * *' },
      { kind: 'queue', name: 'orders', queueName: 'orders-in', connection: 'AzureWebJobsStorage' },
      { kind: 'http', name: 'hello', route: 'greet/{name}', methods: ['GET', 'PUT'], authLevel: 'anonymous' },
      { kind: 'http', name: 'plain', route: 'plain', methods: ['GET', 'POST'], authLevel: 'anonymous' },
    ]);
    // The handlers are the app's own.
    const timer = loaded.registrations[0]!;
    expect(await (timer.handler as () => Promise<unknown>)()).toBe('ticked');
    const seen = (globalThis as { appFunctionsTestSeen?: string[] }).appFunctionsTestSeen!;
    await loaded.start();
    expect(seen).toEqual(['start']);
    await loaded.terminate();
    expect(seen).toEqual(['start', 'terminate']);
  });

  it.each<[string, string, RegExp]>([
    [
      'a trigger kind it does not run',
      `app.storageBlob('scan', { path: 'in/{name}', connection: 'AzureWebJobsStorage', handler: async () => {} });`,
      /^function scan has a blobTrigger, which baton start does not run; baton start runs timerTrigger, queueTrigger and httpTrigger functions$/,
    ],
    [
      'a durable orchestration',
      `app.generic('plan', { trigger: trigger.generic({ type: 'orchestrationTrigger' }), handler: async () => {} });`,
      /^function plan is a Durable Functions orchestrationTrigger: it needs the Functions host with the Durable extension/,
    ],
    [
      'an output binding',
      `app.storageQueue('fwd', { queueName: 'a', connection: 'AzureWebJobsStorage', extraOutputs: [output.storageQueue({ queueName: 'b', connection: 'AzureWebJobsStorage' })], handler: async () => {} });`,
      /^function fwd has a queue out binding \(queueOutput\w+\), which baton start does not provide$/,
    ],
    [
      'a queue on another connection',
      `app.storageQueue('other', { queueName: 'a', connection: 'OtherStorage', handler: async () => {} });`,
      /^function other reads queues through connection OtherStorage; baton start serves AzureWebJobsStorage \(its Azurite\) only$/,
    ],
    [
      'a binding setting that is not set',
      `app.storageQueue('unset', { queueName: '%APP_FUNCTIONS_TEST_UNSET%', connection: 'AzureWebJobsStorage', handler: async () => {} });`,
      /^function unset: its queueTrigger queueName names %APP_FUNCTIONS_TEST_UNSET%, which is not set$/,
    ],
    [
      'an invocation hook',
      `app.timer('t', { schedule: '0 * * * * *', handler: async () => {} }); app.hook.preInvocation(() => {});`,
      /^the app registers a preInvocation hook, which baton start does not run \(it runs appStart and appTerminate\)$/,
    ],
    [
      'no function at all',
      `// nothing`,
      /^the app in .* registered no functions: does .*index\.js call registerBaton\(app, \.\.\.\)\?$/,
    ],
  ])('refuses %s with one line naming it', (_name, source, message) => {
    const dir = appWith(source);
    expect(() => loadFunctionsApp(dir, noLog)).toThrow(message);
  });
});

describe('the entry module', () => {
  it.each<[string, Record<string, unknown> | undefined, RegExp]>([
    ['no package.json', undefined, /package\.json: not found; run baton start in the Functions app$/],
    ['no main', {}, /package\.json has no "main": name the module that registers the app's functions/],
    [
      'a main not built yet',
      { main: 'dist/missing.js' },
      /"main" names dist\/missing\.js, which does not exist: build the app first$/,
    ],
    [
      'a glob main that matches nothing yet',
      { main: 'dist/src/{index.js,functions/*.js}' },
      /"main" is dist\/src\/\{index\.js,functions\/\*\.js\}, which matches no file: build the app first$/,
    ],
  ])('refuses %s', (_name, manifest, message) => {
    const dir = join(root, `entry-${++apps}`);
    mkdirSync(dir, { recursive: true });
    if (manifest) writeFileSync(join(dir, 'package.json'), JSON.stringify(manifest));
    expect(() => appEntries(dir)).toThrow(message);
  });

  it('is main, resolved against the app folder, with or without its .js', () => {
    const dir = appWith('', { main: 'dist/index' });
    expect(appEntries(dir)).toEqual([join(dir, 'dist', 'index')]);
  });

  it("expands a glob main as the worker does (the Functions template's), and loads every module it names", () => {
    const dir = join(root, `entry-${++apps}`);
    mkdirSync(join(dir, 'dist', 'src', 'functions'), { recursive: true });
    writeFileSync(join(dir, 'package.json'), JSON.stringify({ main: 'dist/src/{index.js,functions/*.js}' }));
    const lib = `const { app } = require(${FUNCTIONS});`;
    const write = (path: string, text: string) => writeFileSync(join(dir, 'dist', 'src', path), `${lib}\n${text}\n`);
    write('index.js', "app.timer('from-index', { schedule: '0 * * * * *', handler: async () => {} });");
    write('functions/b.js', "app.http('from-b', { handler: async () => ({}) });");
    write('functions/a.js', "app.http('from-a', { handler: async () => ({}) });");
    writeFileSync(join(dir, 'dist', 'src', 'functions', 'a.js.map'), '{}');
    expect(appEntries(dir)).toEqual([
      join(dir, 'dist', 'src', 'functions', 'a.js'),
      join(dir, 'dist', 'src', 'functions', 'b.js'),
      join(dir, 'dist', 'src', 'index.js'),
    ]);
    expect(loadFunctionsApp(dir, noLog).registrations.map((r) => r.name)).toEqual(['from-a', 'from-b', 'from-index']);
  });
});
