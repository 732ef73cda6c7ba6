import type { Command } from 'commander';
import type { Env } from '../storage/setting';
import { resolveConnection } from './connection';
import { describeFailure, type FailureContext } from './failure';
import { openHub, type HubHandle } from './hub';

/** Where the CLI writes. Each call gets text as is, newlines included. */
export interface CliIo {
  out(text: string): void;
  err(text: string): void;
}

/** What the program reads from its surroundings; the defaults are the real process's. */
export interface CliOptions {
  env?: Env;
  /** Where `local.settings.json` is looked for. */
  cwd?: string;
  /** The time views are drawn at. Default: storage's, learned from its answers (see `HubHandle.now`). */
  now?: () => Date;
  /** Deadline of one storage call (see `CLI_CALL_TIMEOUT_MS`). */
  callTimeoutMs?: number;
}

export interface CliContext {
  io: CliIo;
  env: Env;
  cwd: string;
  now: (() => Date) | undefined;
  callTimeoutMs: number | undefined;
}

export function cliContext(io: CliIo, options: CliOptions = {}): CliContext {
  return {
    io,
    env: options.env ?? process.env,
    cwd: options.cwd ?? process.cwd(),
    now: options.now,
    callTimeoutMs: options.callTimeoutMs,
  };
}

/**
 * Thrown by a command that has already reported what went wrong: `main` returns `exitCode`
 * and prints nothing more. A command (such as `start`) can also throw it to exit non-zero.
 */
export class ExitWith extends Error {
  constructor(readonly exitCode: number) {
    super(`exit ${exitCode}`);
    this.name = 'ExitWith';
  }
}

export interface GlobalOptions {
  connection?: string;
  hub?: string;
  /** Seconds, already checked by the option's parser. */
  timeout?: number;
}

/** The global options as given to `command` (they may appear before or after the command name). */
export function globalsOf(command: Command): GlobalOptions {
  return command.optsWithGlobals<GlobalOptions>();
}

/**
 * Resolves the connection from the command's global options, opens the hub and runs `body`.
 * Any failure becomes one line on stderr (`baton: ...`) and an `ExitWith`.
 */
export async function withHub(ctx: CliContext, command: Command, body: (hub: HubHandle) => Promise<void>): Promise<void> {
  let where: FailureContext | undefined;
  try {
    const globals = globalsOf(command);
    const connection = resolveConnection({ connection: globals.connection, hub: globals.hub, env: ctx.env, cwd: ctx.cwd });
    const callTimeoutMs = globals.timeout !== undefined ? globals.timeout * 1000 : ctx.callTimeoutMs;
    const hub = openHub(connection, callTimeoutMs === undefined ? {} : { callTimeoutMs });
    where = { endpoint: hub.endpoint, source: hub.source };
    await body(hub);
  } catch (err) {
    if (err instanceof ExitWith) throw err;
    const failure = describeFailure(err, where);
    ctx.io.err(`baton: ${failure.line}\n`);
    throw new ExitWith(failure.exitCode);
  }
}
