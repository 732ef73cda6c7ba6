import { InvalidArgumentError, Option, type Command } from 'commander';
import { IF_ACTIVE, keyedRunSegment, pendingRequests, requestCancel, triggerRun, type IfActive } from '../hub/requests';
import { firstRunFailures, listJobNames, readHubStatus, readRunDetails, readRunFailures, type RunDetails } from '../hub/status';
import { listRuns, MAX_RUNS_PAGE } from '../hub/run-index';
import { isTerminal, type RunRecord } from '../hub/run-record';
import { isRunId } from '../hub/run-id';
import { InvalidConfigError } from '../errors';
import { CliError } from './connection';
import { withHub, type CliContext } from './context';
import type { HubHandle } from './hub';
import { FAILURES_LISTED, runView, showView, statusView, type RunsView, type StatusView } from '../hub/read-model';
import { renderRuns, renderShow, renderStatus, toJson } from './format';
import { examples } from './help';
import { EXIT } from './exit-codes';
import { describeFailure } from './failure';
import { DEFAULT_INTERVAL_SECONDS, frameWriter, isTerminalIo, parseInterval, stopSignal, watch, watchHeader } from './watch';

const DEFAULT_LIMIT = 20;

function parseLimit(value: string): number {
  const n = Number(value);
  if (!/^\d+$/.test(value.trim()) || !Number.isSafeInteger(n) || n < 1 || n > 10_000) {
    throw new InvalidArgumentError('must be a whole number from 1 to 10000');
  }
  return n;
}

/** A run id from the command line, checked before it names a blob (storage resolves `..`). */
function runIdArgument(value: string): string {
  if (!isRunId(value)) throw new InvalidArgumentError('not a run id: <job>/<occurrence or manual-id>, as baton runs lists it');
  return value;
}

const unknownRun = (runId: string, hub: string) => new CliError(`no run ${runId} in hub ${hub}; list runs with 'baton runs'`);

/**
 * What to say about a run id with no record. A manual run's request may still wait for the
 * leader, or for a leader that runs its job (an hour at most), or have been dropped after that,
 * which the leader says only in its own log, so this is where a user learns of it.
 */
async function missingRun(hub: HubHandle, runId: string): Promise<CliError> {
  const manual = /^(.+)\/manual-([0-9a-f-]{36})$/.exec(runId);
  if (!manual) return unknownRun(runId, hub.hub);
  const [, job, id] = manual as unknown as [string, string, string];
  for await (const { request } of pendingRequests(hub.docs)) {
    if (request?.kind === 'run' && request.id === id) {
      return new CliError(
        `no run ${runId} in hub ${hub.hub} yet: its request waits for the next tick of a leader that runs job ${job} (an hour at most)`,
      );
    }
  }
  const known = await listJobNames(hub.docs);
  if (known.includes(job)) return unknownRun(runId, hub.hub);
  return new CliError(
    `no run ${runId} in hub ${hub.hub}, and no request for it waits: a request no leader could run for an hour is dropped, ` +
      `and hub ${hub.hub} has no job ${job} (known: ${known.length > 0 ? known.join(', ') : 'none yet'})`,
  );
}

async function lateRunOrWhyMissing(hub: HubHandle, runId: string): Promise<RunDetails> {
  const why = await missingRun(hub, runId);
  // The leader may have started the run while we looked for its request.
  const late = await readRunDetails(hub.docs, runId);
  if (late) return late;
  throw why;
}

/** Lines of `baton failures` written at a time: the output streams, whatever the number of failures. */
const FAILURE_LINES_PER_WRITE = 1000;

/**
 * `status --watch`: the text of `status`, read again until SIGINT or SIGTERM (or a closed
 * stdout). Only the reads fail inside the loop; a bad connection setting has already failed
 * before it, with its exit code.
 */
async function watchStatus(
  ctx: CliContext,
  hub: HubHandle,
  read: (abortSignal: AbortSignal) => Promise<{ now: Date; view: StatusView }>,
  intervalSeconds: number,
): Promise<void> {
  const { io } = ctx;
  const terminal = isTerminalIo(io) ? io : undefined;
  const writer = frameWriter(
    (text) => io.out(text),
    () => terminal?.terminal(),
  );
  const stop = stopSignal(terminal?.closed);
  const where = { endpoint: hub.endpoint, source: hub.source };
  try {
    await watch({
      intervalMs: intervalSeconds * 1000,
      signal: stop.signal,
      writer,
      frame: async (signal) => {
        const header = (at: Date) => watchHeader('baton status', at, intervalSeconds, writer.interactive);
        const started = ctx.now?.() ?? hub.clock.date();
        try {
          const { now, view } = await read(signal);
          return `${header(now)}\n\n${renderStatus(view, now)}`;
        } catch (err) {
          if (signal.aborted) throw err;
          return `${header(started)}\n\nbaton: ${describeFailure(err, where).line}\n`;
        }
      },
    });
  } finally {
    stop.dispose();
  }
}

/** `status`, `runs`, `show`, `failures`, `trigger` and `cancel`: the commands that read or steer a hub. */
export function registerHubCommands(program: Command, ctx: CliContext): void {
  const { io } = ctx;

  program
    .command('status')
    .description('the leader, its epoch and how long it has led; active runs with progress; jobs')
    .option('--json', 'print one JSON document')
    .option('--watch', 'read again and redraw every --interval seconds until Ctrl-C (in place on a terminal)')
    .option(
      '--interval <seconds>',
      `with --watch: seconds from the end of one read to the next, 0.5 to 3600 (default ${DEFAULT_INTERVAL_SECONDS})`,
      parseInterval,
    )
    .addHelpText(
      'after',
      [
        examples(
          'baton status --connection UseDevelopmentStorage=true   # the local cluster of npm start',
          'baton status --hub nightly --json',
          'baton status --watch --interval 5',
        ),
        '',
        'With --watch, a terminal shows one frame redrawn in place; a pipe gets every frame, a blank line',
        'between them. Each frame starts with the time of its read. A read that fails shows its error',
        'as the frame and the watch goes on. Ctrl-C or SIGTERM ends it with exit 0.',
      ].join('\n'),
    )
    .action(async (options: { json?: boolean; watch?: boolean; interval?: number }, command: Command) => {
      if (options.watch && options.json) {
        throw new CliError(
          '--watch does not combine with --json; for one document per read, run baton status --json in a loop',
          EXIT.usage,
        );
      }
      if (options.interval !== undefined && !options.watch) throw new CliError('--interval needs --watch', EXIT.usage);
      await withHub(ctx, command, async (hub) => {
        const read = async (abortSignal?: AbortSignal) => {
          let now = new Date(0);
          const at = () => (now = ctx.now?.() ?? hub.clock.date());
          const status = await readHubStatus(hub.docs, hub.lease, { now: at, abortSignal });
          return { now, view: statusView(hub.hub, hub.endpoint, status, now) };
        };
        if (options.watch) return watchStatus(ctx, hub, read, options.interval ?? DEFAULT_INTERVAL_SECONDS);
        const { now, view } = await read();
        io.out(options.json ? toJson(view) : renderStatus(view, now));
      });
    });

  program
    .command('runs')
    .description('runs, newest first')
    .option('--job <name>', 'only runs of this job')
    .option('--limit <n>', `at most this many (default ${DEFAULT_LIMIT})`, parseLimit)
    .option('--after <next>', 'the runs older than a page: the next that page printed (with the same --job)')
    .option('--json', 'print one JSON document')
    .addHelpText(
      'after',
      examples('baton runs --job nightly-totals --limit 5', 'baton runs --json', 'baton runs --after <next of the page before>'),
    )
    .action(async (options: { job?: string; limit?: number; after?: string; json?: boolean }, command: Command) => {
      await withHub(ctx, command, async (hub) => {
        // A page of the index holds at most MAX_RUNS_PAGE runs: a larger --limit reads several.
        const runs: RunRecord[] = [];
        let next = options.after;
        let left = options.limit ?? DEFAULT_LIMIT;
        do {
          let page;
          try {
            page = await listRuns(hub.docs, {
              limit: Math.min(left, MAX_RUNS_PAGE),
              ...(options.job ? { job: options.job } : {}),
              ...(next === undefined ? {} : { after: next }),
            });
          } catch (err) {
            if (err instanceof InvalidConfigError) throw new CliError(`--${err.message}`, EXIT.usage);
            throw err;
          }
          runs.push(...page.runs);
          left -= page.runs.length;
          next = page.next;
        } while (left > 0 && next !== undefined);
        const now = ctx.now?.() ?? hub.clock.date();
        const view: RunsView & { next: string | null } = {
          hub: hub.hub,
          job: options.job ?? null,
          runs: runs.map((r) => runView(r, now)),
          next: next ?? null,
        };
        io.out(options.json ? toJson(view) : renderRuns(view, now));
      });
    });

  program
    .command('show')
    .description('one run: state, counters, failures and output')
    .argument('<runId>', "the run id, as 'baton runs' lists it", runIdArgument)
    .option('--json', 'print one JSON document')
    .addHelpText(
      'after',
      examples('baton show nightly-totals/2026-11-21T02:00:00.000Z', 'baton show nightly-totals/manual-<id> --json'),
    )
    .action(async (runId: string, options: { json?: boolean }, command: Command) => {
      await withHub(ctx, command, async (hub) => {
        const details = (await readRunDetails(hub.docs, runId)) ?? (await lateRunOrWhyMissing(hub, runId));
        const listed = await firstRunFailures(hub.docs, details, FAILURES_LISTED);
        const now = ctx.now?.() ?? hub.clock.date();
        const view = showView(hub.hub, hub.resources.container, details, listed, now);
        io.out(options.json ? toJson(view) : renderShow(view, now));
      });
    });

  program
    .command('failures')
    .description('every failed item of a run with its reason: one JSON line each, in the order they were counted')
    .argument('<runId>', "the run id, as 'baton runs' lists it", runIdArgument)
    .addHelpText(
      'after',
      examples(
        'baton failures nightly-totals/2026-11-21T02:00:00.000Z',
        "baton failures nightly-totals/manual-<id> | jq -r '.reason' | sort | uniq -c   # failures by reason",
      ),
    )
    .action(async (runId: string, _options: unknown, command: Command) => {
      await withHub(ctx, command, async (hub) => {
        const details = (await readRunDetails(hub.docs, runId)) ?? (await lateRunOrWhyMissing(hub, runId));
        const gone: string[] = [];
        const onMissing = (key: string) => gone.push(key);
        let lines: string[] = [];
        for await (const failure of readRunFailures(hub.docs, details, { onMissing })) {
          lines.push(JSON.stringify(failure));
          if (lines.length < FAILURE_LINES_PER_WRITE) continue;
          io.out(`${lines.join('\n')}\n`);
          lines = [];
        }
        if (lines.length) io.out(`${lines.join('\n')}\n`);
        if (gone.length) throw new CliError(`failures in ${gone.join(', ')} were not printed: gone from storage`);
      });
    });

  program
    .command('trigger')
    .description('ask the leader to start a manual run of a job now; prints the run id it will have')
    .argument('<job>', 'the job name')
    .option('--force', 'request it even if no leader has recorded the job yet')
    .option('--key <key>', 'an idempotency key: every trigger of the job with the same key names the same run, started once')
    .addOption(
      new Option(
        '--if-active <what>',
        'while a run of the job is open: start another, skip (print the open run), or wait for it to end',
      )
        .choices([...IF_ACTIVE])
        .default('start'),
    )
    .option('--json', 'print one JSON document')
    .addHelpText(
      'after',
      examples(
        'baton trigger nightly-totals',
        'baton trigger nightly-totals --key 2026-11-27   # retried, it names the same run and starts nothing new',
        'baton trigger new-job --force          # before any leader has recorded the job',
      ),
    )
    .action(
      async (job: string, options: { force?: boolean; key?: string; ifActive: IfActive; json?: boolean }, command: Command) => {
        if (options.key !== undefined) {
          try {
            keyedRunSegment(options.key);
          } catch (err) {
            if (err instanceof InvalidConfigError) throw new CliError(`--${err.message}`, EXIT.usage);
            throw err;
          }
        }
        await withHub(ctx, command, async (hub) => {
          let checked = false;
          if (!options.force) {
            const known = await listJobNames(hub.docs);
            // A hub no leader has ticked on yet has no job records; then the request just waits.
            if (known.length > 0 && !known.includes(job)) {
              throw new CliError(
                `hub ${hub.hub} has no job ${job} (known: ${known.join(', ')}); pass --force to request it anyway`,
              );
            }
            checked = known.length > 0;
          }
          const { runId, requested } = await triggerRun(hub.docs, job, {
            clock: hub.clock,
            ifActive: options.ifActive,
            ...(options.key === undefined ? {} : { key: options.key }),
            // The request stands whatever happens to the wake: say so, and go on.
            wake: (call) =>
              hub
                .wake(call)
                .catch((err: unknown) =>
                  io.err(
                    `note: could not wake a resting leader (${describeFailure(err).line}); the run starts when its rest ends, within 10 minutes\n`,
                  ),
                ),
          });
          if (!requested) {
            io.out(
              options.json
                ? toJson({ hub: hub.hub, job, runId, requested: false, skipped: true })
                : `skipped: run ${runId} of job ${job} is open, and nothing was requested; follow it with: baton show ${runId}\n`,
            );
            return;
          }
          const unchecked = checked
            ? ''
            : `job ${job} was not checked (${options.force ? '--force' : `no leader has recorded the jobs of hub ${hub.hub} yet`}): ` +
              `a leader that does not run it leaves the request for one that does, for an hour, then drops it (logging "dropped a run request for job ${job}"), and baton show then says so\n`;
          io.out(
            options.json
              ? toJson({ hub: hub.hub, job, runId, requested: true, jobChecked: checked })
              : `requested run ${runId}\nthe leader starts it ${options.ifActive === 'wait' ? "once the job's open runs have ended" : 'on its next tick'}; follow it with: baton show ${runId}\n${unchecked}`,
          );
        });
      },
    );

  program
    .command('cancel')
    .description('ask the leader to cancel an open run')
    .argument('<runId>', "the run id, as 'baton runs' lists it", runIdArgument)
    .option('--reason <text>', "recorded as the run's end reason", 'cancelled with the baton CLI')
    .option('--json', 'print one JSON document')
    .addHelpText(
      'after',
      examples(
        'baton cancel nightly-totals/manual-<id>',
        'baton cancel nightly-totals/2026-11-21T02:00:00.000Z --reason "bad input"',
      ),
    )
    .action(async (runId: string, options: { reason: string; json?: boolean }, command: Command) => {
      await withHub(ctx, command, async (hub) => {
        const details = await readRunDetails(hub.docs, runId);
        if (!details) throw unknownRun(runId, hub.hub);
        const { state } = details.record;
        if (isTerminal(state)) {
          io.out(
            options.json
              ? toJson({ hub: hub.hub, runId, requested: false, state })
              : `run ${runId} already ended (${state}); nothing to cancel\n`,
          );
          return;
        }
        await requestCancel(hub.docs, runId, options.reason, { clock: hub.clock });
        io.out(
          options.json
            ? toJson({ hub: hub.hub, runId, requested: true, state })
            : `requested cancel of run ${runId} (${state}); the leader cancels it on its next tick\n`,
        );
      });
    });
}
