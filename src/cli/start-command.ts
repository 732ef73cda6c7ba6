import { InvalidArgumentError, type Command } from 'commander';
import { DEFAULT_CLUSTER, runCluster } from '../local/cluster';
import { CliError } from './connection';
import { ExitWith } from './context';
import { EXIT } from './failure';
import { parseBatonSettings } from '../storage/settings';

function positiveInt(what: string, max: number) {
  return (value: string): number => {
    const n = Number(value);
    if (!Number.isInteger(n) || n < 1 || n > max)
      throw new InvalidArgumentError(`${what} must be a whole number from 1 to ${max}`);
    return n;
  };
}

/** `baton start`: the local cluster on embedded Azurite (what `npm start` runs). */
export function registerStart(program: Command): void {
  program
    .command('start')
    .description('run a local cluster: Azurite in-process, demo data, and several instances electing a leader')
    .option('--instances <n>', 'instance processes', positiveInt('--instances', 16), DEFAULT_CLUSTER.instances)
    .option('--data <dir>', 'persist Azurite to this folder (default: in memory)')
    .option('--once', 'run one occurrence of the sample job, print the summary and exit (non-zero unless it succeeded)', false)
    .option(
      '--kill-leader-after <seconds>',
      'kill -9 the leading instance this long into the run, and start a replacement',
      positiveInt('--kill-leader-after', 3600),
    )
    .option('--job <name>', 'the job --once runs', DEFAULT_CLUSTER.job)
    .option('--output <file>', 'with --once: write the run record and output here as JSON')
    .action(
      async (opts: {
        instances: number;
        data?: string;
        once: boolean;
        killLeaderAfter?: number;
        job: string;
        output?: string;
      }) => {
        const globals = program.opts() as { hub?: string; connection?: string };
        if (globals.connection)
          throw new CliError('start runs its own Azurite; --connection applies to the other commands', EXIT.failed);
        if (!opts.once && (opts.killLeaderAfter !== undefined || opts.output)) {
          throw new CliError('--kill-leader-after and --output need --once', EXIT.failed);
        }
        const hub = globals.hub ?? DEFAULT_CLUSTER.hub;
        try {
          parseBatonSettings({ BATON_HUB: hub });
        } catch (err) {
          // The same rule the instances apply, checked before anything starts; one line, as --hub.
          throw new CliError(`--hub: ${(err as Error).message.replace(/^BATON_HUB /, '')}`, EXIT.failed);
        }
        const code = await runCluster({
          ...DEFAULT_CLUSTER,
          instances: opts.instances,
          once: opts.once,
          job: opts.job,
          hub,
          ...(opts.data ? { data: opts.data } : {}),
          ...(opts.killLeaderAfter ? { killLeaderAfterSeconds: opts.killLeaderAfter } : {}),
          ...(opts.output ? { outputFile: opts.output } : {}),
          out: process.stdout,
          tty: Boolean(process.stdout.isTTY),
        });
        if (code !== 0) throw new ExitWith(code);
      },
    );
}
