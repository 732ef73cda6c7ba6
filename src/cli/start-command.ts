import { accessSync, constants, mkdirSync } from 'node:fs';
import { InvalidArgumentError, type Command } from 'commander';
import { resolve } from 'node:path';
import { describeThrown, isBatonError } from '../errors';
import type { JobDefinition } from '../jobs/job-definition';
import { setLocalHostBridge } from '../app/local-host-bridge';
import { appHostJson, loadFunctionsApp } from '../local/app-functions';
import { DEFAULT_CLUSTER, LOCAL_MAX_IN_FLIGHT, runCluster, SetupFailedError } from '../local/cluster';
import { loadSetupModule, type SetupFunction } from '../local/setup-module';
import { CliError, readLocalSettings } from './connection';
import { ExitWith } from './context';
import { examples } from './help';
import { EXIT } from './failure';
import { parseBatonSettings } from '../app/settings';
import { redactSecrets } from '../redact';

function positiveInt(what: string, max: number) {
  return (value: string): number => {
    const n = Number(value);
    if (!Number.isInteger(n) || n < 1 || n > max)
      throw new InvalidArgumentError(`${what} must be a whole number from 1 to ${max}`);
    return n;
  };
}

function portNumber(value: string): number {
  const n = Number(value);
  if (!/^\d+$/.test(value) || n > 65535)
    throw new InvalidArgumentError('--port must be a whole number from 0 to 65535 (0: any free port)');
  return n;
}

/**
 * Loads the app once in this process, on the settings the cluster gives each instance, before
 * Azurite starts: a bad setting, job or registration is then one line and exit 1, not a line per
 * instance and a cluster that stops when all of them have died. Returns the app's job names.
 */
function inspectApp(appDir: string, hub: string): string[] {
  // What the cluster sets for each instance (see spawnInstance): the app reads process.env, as
  // under the host, and the instances inherit it. Storage is the cluster's own Azurite.
  Object.assign(process.env, {
    AzureWebJobsStorage: 'UseDevelopmentStorage=true',
    BATON_HUB: hub,
    BATON_COORDINATOR_SCHEDULE: DEFAULT_CLUSTER.coordinatorSchedule,
    BATON_MAX_IN_FLIGHT: process.env.BATON_MAX_IN_FLIGHT ?? LOCAL_MAX_IN_FLIGHT,
  });
  let jobs: readonly JobDefinition[] | undefined;
  setLocalHostBridge({
    inspectOnly: true,
    // The host.json each instance runs with.
    hostJson: appHostJson(appDir, process.env).path,
    attach: (made) => {
      if (made.runtime.settings.engine === 'durable') {
        throw new CliError(
          'BATON_ENGINE=durable needs the Functions host with the Durable extension (func start, or Azure); baton start runs the queue engine',
          EXIT.failed,
        );
      }
      jobs = made.jobs;
    },
  });
  try {
    loadFunctionsApp(appDir, () => {});
  } catch (err) {
    if (err instanceof CliError) throw err;
    if (isBatonError(err, 'InvalidSetting') || isBatonError(err, 'InvalidConfig')) {
      throw new CliError(redactSecrets(err.message), EXIT.failed);
    }
    // The app's own start-up failed (or its host.json): one line, as the host would report it.
    const text = describeThrown(err);
    throw new CliError(`the app in ${appDir} failed to load: ${redactSecrets(text).replace(/\s*\n\s*/g, ' ')}`, EXIT.failed);
  } finally {
    setLocalHostBridge(undefined);
  }
  if (!jobs)
    throw new CliError(`the app in ${appDir} does not call registerBaton(app, ...): baton start runs Baton apps`, EXIT.failed);
  return jobs.map((job) => job.name);
}

/** `Values` of the app's local.settings.json, under what the environment already sets (as `func start`). */
function applyLocalSettings(appDir: string): void {
  for (const [name, value] of Object.entries(readLocalSettings(appDir))) {
    if (process.env[name] === undefined) process.env[name] = value;
  }
}

/** The job `--once` runs when `--job` is not given: the app's only one. */
function onlyJob(jobs: readonly string[]): string {
  if (jobs.length === 1) return jobs[0]!;
  if (jobs.length === 0) throw new CliError('--once has no job to run: this app registers none', EXIT.usage);
  throw new CliError(`--once needs --job: this app has several jobs (${jobs.join(', ')})`, EXIT.usage);
}

async function setupOf(path: string): Promise<SetupFunction> {
  try {
    return await loadSetupModule(path);
  } catch (err) {
    throw new CliError((err as Error).message, EXIT.usage);
  }
}

/** Creates `--log-dir` before anything starts, so a folder that cannot be written is one line. */
function makeLogDir(dir: string): void {
  try {
    mkdirSync(dir, { recursive: true });
    accessSync(dir, constants.W_OK);
  } catch (err) {
    throw new CliError(
      `--log-dir ${dir}: cannot write there (${(err as NodeJS.ErrnoException).code ?? (err as Error).message})`,
      EXIT.failed,
    );
  }
}

/** `baton start`: the local cluster on embedded Azurite (what `npm start` runs). */
export function registerStart(program: Command): void {
  program
    .command('start')
    .description('run a local cluster: Azurite in-process and several instances of the app electing a leader')
    .option('--app <dir>', 'the Functions app to run: its package.json main, host.json and local.settings.json (default: here)')
    .option('--instances <n>', 'instance processes', positiveInt('--instances', 16), DEFAULT_CLUSTER.instances)
    .option('--data <dir>', 'persist Azurite to this folder (default: in memory)')
    .option('--once', 'run one occurrence of a job (--job), print the summary and exit (non-zero unless it succeeded)', false)
    .option(
      '--kill-leader-after <seconds>',
      'kill -9 the leading instance this long into the run, and start a replacement',
      positiveInt('--kill-leader-after', 3600),
    )
    .option('--job <name>', "the job --once runs (default: the app's only job)")
    .option(
      '--setup <module>',
      "a module run once Azurite is up, before the instances: its setup({ env, signal, log }) writes the app's local data",
    )
    .option('--output <file>', 'with --once: write the run record and output here as JSON')
    .option('--log-dir <dir>', "keep each instance's whole output (stdout and stderr) in <dir>/<instance>.log")
    .option(
      '--port <n>',
      'the status page and HTTP API on 127.0.0.1 (default 7071, or a free port if taken; 0: a free port)',
      portNumber,
    )
    .addHelpText(
      'after',
      [
        examples(
          "baton start --once                        # run the app's job once, print the summary",
          'baton start --setup dist/seed.js          # write local data before the instances start',
          'baton start --once --kill-leader-after 3  # kill -9 the leader mid-run',
          'baton start --instances 5 --data .azurite',
          'baton start --port 8080                   # the status page at http://127.0.0.1:8080/api/baton/page',
        ),
        '',
        'start runs its own Azurite: of the global options only --hub applies.',
      ].join('\n'),
    )
    .action(
      async (opts: {
        instances: number;
        data?: string;
        once: boolean;
        killLeaderAfter?: number;
        job?: string;
        output?: string;
        logDir?: string;
        port?: number;
        app?: string;
        setup?: string;
      }) => {
        const globals = program.opts() as { hub?: string; connection?: string };
        if (globals.connection)
          throw new CliError('start runs its own Azurite; --connection applies to the other commands', EXIT.usage);
        if (!opts.once && (opts.killLeaderAfter !== undefined || opts.output)) {
          throw new CliError('--kill-leader-after and --output need --once', EXIT.usage);
        }
        const hub = globals.hub ?? DEFAULT_CLUSTER.hub;
        try {
          parseBatonSettings({ BATON_HUB: hub });
        } catch (err) {
          // The same rule the instances apply, checked before anything starts; one line, as --hub.
          throw new CliError(`--hub: ${(err as Error).message.replace(/^BATON_HUB /, '')}`, EXIT.usage);
        }
        const appDir = resolve(opts.app ?? process.cwd());
        applyLocalSettings(appDir);
        const jobs = inspectApp(appDir, hub);
        const job = opts.job ?? (opts.once ? onlyJob(jobs) : undefined);
        // Otherwise no leader here runs it, and --once waits for a run that never comes.
        if (job !== undefined && !jobs.includes(job)) {
          throw new CliError(`--job ${job} is not a job of this app (jobs: ${jobs.join(', ')})`, EXIT.usage);
        }
        const setup = opts.setup === undefined ? undefined : await setupOf(opts.setup);
        if (opts.logDir) makeLogDir(opts.logDir);
        const code = await runCluster({
          ...DEFAULT_CLUSTER,
          instances: opts.instances,
          app: appDir,
          once: opts.once,
          ...(job !== undefined ? { job } : {}),
          ...(setup ? { setup } : {}),
          hub,
          ...(opts.data ? { data: opts.data } : {}),
          ...(opts.killLeaderAfter ? { killLeaderAfterSeconds: opts.killLeaderAfter } : {}),
          ...(opts.output ? { outputFile: opts.output } : {}),
          ...(opts.logDir ? { logDir: opts.logDir } : {}),
          ...(opts.port !== undefined ? { port: opts.port } : {}),
          out: process.stdout,
          tty: Boolean(process.stdout.isTTY),
        }).catch((err: unknown) => {
          if (err instanceof SetupFailedError) throw new CliError(err.message, EXIT.failed);
          throw err;
        });
        if (code !== 0) throw new ExitWith(code);
      },
    );
}
