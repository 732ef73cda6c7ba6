#!/usr/bin/env node
import { Command, CommanderError, InvalidArgumentError } from 'commander';
import { cliContext, ExitWith, type CliIo, type CliOptions } from './context';
import { describeFailure, EXIT } from './failure';
import { examples, EXIT_CODES_HELP } from './help';
import { registerHubCommands } from './hub-commands';
import { registerStart } from './start-command';
import type { TerminalIo } from './watch';
import { packageVersion } from '../app/package-version';
import { redactSecrets } from '../redact';

export type { CliIo, CliOptions } from './context';
export { ExitWith } from './context';
export { CliError } from './connection';
export { EXIT } from './failure';

/** Aborted when stdout's reader has gone (EPIPE), so `status --watch | head` ends. */
const stdoutClosed = new AbortController();

const processIo: TerminalIo = {
  out: (text) => void process.stdout.write(text),
  err: (text) => void process.stderr.write(text),
  // A dumb terminal cannot move its cursor: it gets the plain frames a pipe gets.
  terminal: () =>
    process.stdout.isTTY && process.env.TERM !== 'dumb'
      ? { columns: process.stdout.columns || 80, rows: process.stdout.rows || 24 }
      : undefined,
  closed: stdoutClosed.signal,
};

/**
 * The `baton` program, without parsing anything. Commands report their own failures on
 * `io.err` and throw `ExitWith`; `main` turns that into the exit code.
 */
export function buildProgram(io: CliIo = processIo, options: CliOptions = {}): Command {
  const ctx = cliContext(io, options);
  const program = new Command('baton')
    .description('Scheduled fan-out/fan-in jobs on Azure Functions: look into a hub and steer it.')
    .option('--connection <string>', 'storage connection string (default: AzureWebJobsStorage, then local.settings.json)')
    .option('--hub <name>', 'hub name (default: BATON_HUB, then local.settings.json, then baton)')
    .option('--timeout <seconds>', 'longest one storage call may take, retries included (default 10)', parseTimeoutSeconds)
    // Set before any command is added: subcommands copy these settings.
    .exitOverride()
    .configureOutput({
      writeOut: (text) => io.out(text),
      writeErr: (text) => io.err(text),
      // Commander's errors can span lines (a suggestion follows); the CLI promises one line. They
      // can quote an argument, and a mistyped option may be followed by a connection string.
      outputError: (text, write) =>
        write(
          `baton: ${redactSecrets(text)
            .replace(/^error: /, '')
            .trim()
            .replace(/\s*\n\s*/g, ' ')}\n`,
        ),
    })
    .showSuggestionAfterError(true)
    // A subcommand's help lists the global options too (--connection, --hub, --timeout).
    .configureHelp({ showGlobalOptions: true })
    .addHelpText(
      'after',
      examples('baton status --connection UseDevelopmentStorage=true', 'baton runs --job nightly-totals', 'baton help trigger'),
    )
    // On every command's help, after its own text.
    .addHelpText('afterAll', `\n${EXIT_CODES_HELP}`);
  const version = packageVersion();
  if (version) program.version(version);

  registerHubCommands(program, ctx);

  registerStart(program);

  return program;
}

/**
 * Runs the CLI on `argv` (the arguments after the program name, as in
 * `process.argv.slice(2)`) and resolves to the exit code: 0 done, 1 failed, 2 usage error
 * (unknown command or option, missing argument, bad option value), 3 storage unreachable.
 */
export async function main(argv: string[], io: CliIo = processIo, options: CliOptions = {}): Promise<number> {
  const program = buildProgram(io, options);
  try {
    await program.parseAsync(argv, { from: 'user' });
    return EXIT.ok;
  } catch (err) {
    if (err instanceof ExitWith) return err.exitCode;
    // Commander has already printed its message (or the help or version). Any of its errors is a
    // usage error, as is `baton` with no command (help on stderr); `--help` and `--version` are not.
    if (err instanceof CommanderError) return err.exitCode === 0 ? EXIT.ok : EXIT.usage;
    const failure = describeFailure(err);
    io.err(`baton: ${failure.line}\n`);
    return failure.exitCode;
  }
}

/** `--timeout`: whole seconds, 1 to 600, so a typo such as `10ms` fails instead of meaning 10 s. */
function parseTimeoutSeconds(value: string): number {
  const n = Number(value);
  if (!/^\d+$/.test(value.trim()) || n < 1 || n > 600) throw new InvalidArgumentError('must be whole seconds from 1 to 600');
  return n;
}

/** Runs `baton` on this process's arguments and exits with its code: what the `bin` runs. */
export function runCli(): void {
  // `baton status | head` closes stdout early; that is not an error worth a stack trace.
  process.stdout.on('error', (err: NodeJS.ErrnoException) => {
    if (err.code !== 'EPIPE') throw err;
    stdoutClosed.abort();
  });
  void main(process.argv.slice(2)).then((code) => {
    process.exitCode = code;
    // Let output drain, but do not let an idle socket keep a finished command alive.
    setTimeout(() => process.exit(code), 2000).unref();
  });
}

if (typeof require !== 'undefined' && typeof module !== 'undefined' && require.main === module) runCli();
