import { setTimeout as sleep } from 'node:timers/promises';
import { InvalidArgumentError } from 'commander';
import type { CliIo } from './context';

export const DEFAULT_INTERVAL_SECONDS = 2;
const MIN_INTERVAL_SECONDS = 0.5;
const MAX_INTERVAL_SECONDS = 3600;

/**
 * `--interval`: plain decimal seconds, so `2s` or `500ms` fail instead of meaning something
 * else; the floor keeps a typo such as `0.05` from hammering the storage account.
 */
export function parseInterval(value: string): number {
  const n = Number(value);
  if (!/^(\d+(\.\d+)?|\.\d+)$/.test(value.trim()) || n < MIN_INTERVAL_SECONDS || n > MAX_INTERVAL_SECONDS) {
    throw new InvalidArgumentError(`must be seconds from ${MIN_INTERVAL_SECONDS} to ${MAX_INTERVAL_SECONDS}, such as 2 or 0.5`);
  }
  return n;
}

export interface TerminalSize {
  columns: number;
  rows: number;
}

/**
 * An io that can tell whether its output is a terminal (the real process's is), and when its
 * output has gone (a closed pipe): a watch that writes into a closed pipe would run forever.
 */
export interface TerminalIo extends CliIo {
  terminal(): TerminalSize | undefined;
  closed?: AbortSignal;
}

export function isTerminalIo(io: CliIo): io is TerminalIo {
  return 'terminal' in io && typeof io.terminal === 'function';
}

/** Draws one frame after another: over the last one on a terminal, below it elsewhere. */
export interface FrameWriter {
  /** A terminal, where a frame can say how to stop the watch. */
  readonly interactive: boolean;
  draw(frame: string): void;
  /** Leaves the terminal as it was found (cursor shown); the last frame stays. */
  close(): void;
}

const ESC = '\u001b[';
export const HIDE_CURSOR = `${ESC}?25l`;
export const SHOW_CURSOR = `${ESC}?25h`;
const ERASE_DOWN = `${ESC}J`;
const HOME_AND_CLEAR = `${ESC}H${ESC}2J`;
const linesUp = (n: number) => `\r${ESC}${n}A`;

/** Terminal rows `frame` takes when printed from column 1, long lines wrapping at `columns`. */
export function rowsOf(frame: string, columns: number): number {
  const lines = frame.split('\n');
  if (lines.at(-1) === '') lines.pop();
  const width = Math.max(1, columns);
  return lines.reduce((rows, line) => rows + Math.max(1, Math.ceil(line.length / width)), 0);
}

/** The writer for `write`: in place when `terminal` reports a size, plain frames otherwise. */
export function frameWriter(write: (text: string) => void, terminal: () => TerminalSize | undefined): FrameWriter {
  return terminal() ? new InPlaceWriter(write, terminal) : new PlainWriter(write);
}

/**
 * Erases the previous frame and draws the next in one write, so the screen never shows half a
 * frame. Erasing only the lines it drew keeps what was on the terminal above the watch; a frame
 * as tall as the screen has scrolled its top out of reach of the cursor, so then it clears the
 * screen and draws from the top instead.
 */
class InPlaceWriter implements FrameWriter {
  readonly interactive = true;
  private shownRows = 0;
  private cursorHidden = false;

  constructor(
    private readonly write: (text: string) => void,
    private readonly terminal: () => TerminalSize | undefined,
  ) {}

  draw(frame: string): void {
    // Read on every frame: the terminal may have been resized since the last one.
    const size = this.terminal() ?? { columns: 80, rows: 24 };
    let prefix = '';
    if (!this.cursorHidden) {
      prefix += HIDE_CURSOR;
      this.cursorHidden = true;
    }
    if (this.shownRows > 0) prefix += this.shownRows < size.rows ? linesUp(this.shownRows) + ERASE_DOWN : HOME_AND_CLEAR;
    this.write(prefix + frame);
    this.shownRows = rowsOf(frame, size.columns);
  }

  close(): void {
    if (!this.cursorHidden) return;
    this.cursorHidden = false;
    this.write(SHOW_CURSOR);
  }
}

/** For a pipe or a file: every frame in full, a blank line between them, no escape codes. */
class PlainWriter implements FrameWriter {
  readonly interactive = false;
  private frames = 0;

  constructor(private readonly write: (text: string) => void) {}

  draw(frame: string): void {
    this.write(this.frames++ > 0 ? `\n${frame}` : frame);
  }

  close(): void {}
}

/** The first line of every frame: when its read began (the ages in it count from then). */
export function watchHeader(command: string, at: Date, intervalSeconds: number, interactive: boolean): string {
  return `${command} at ${at.toISOString()}  (every ${intervalSeconds}s${interactive ? '; Ctrl-C stops' : ''})`;
}

/**
 * An abort signal for "stop watching": SIGINT or SIGTERM, or any of `also`. Listening replaces
 * Node's default of dying on those signals, so the watch can restore the cursor and exit 0.
 */
export function stopSignal(...also: (AbortSignal | undefined)[]): { signal: AbortSignal; dispose(): void } {
  const controller = new AbortController();
  const stop = () => controller.abort();
  process.on('SIGINT', stop);
  process.on('SIGTERM', stop);
  for (const other of also) {
    if (other?.aborted) stop();
    else other?.addEventListener('abort', stop, { once: true });
  }
  return {
    signal: controller.signal,
    dispose: () => {
      process.off('SIGINT', stop);
      process.off('SIGTERM', stop);
      for (const other of also) other?.removeEventListener('abort', stop);
    },
  };
}

const ABORTED = Symbol('aborted');

/**
 * Settles like `work`, or with `ABORTED` as soon as `signal` aborts: a read whose storage call
 * does not heed its signal (or is stuck in a retry delay) must not hold up the exit.
 */
async function untilAborted<T>(work: Promise<T>, signal: AbortSignal): Promise<T | typeof ABORTED> {
  // Once aborted, the read's own rejection has nobody to report to.
  work.catch(() => undefined);
  let onAbort: (() => void) | undefined;
  const aborted = new Promise<typeof ABORTED>((resolve) => {
    onAbort = () => resolve(ABORTED);
    if (signal.aborted) onAbort();
    else signal.addEventListener('abort', onAbort, { once: true });
  });
  try {
    return await Promise.race([work, aborted]);
  } finally {
    if (onAbort) signal.removeEventListener('abort', onAbort);
  }
}

export interface WatchOptions {
  /** Pause between the end of one read and the start of the next. */
  intervalMs: number;
  /** Ends the watch, and aborts the read in flight. */
  signal: AbortSignal;
  writer: FrameWriter;
  /**
   * Reads and renders one frame. A failed read should come back as a frame saying so; a
   * rejection ends the watch, unless it came from `signal` aborting.
   */
  frame(signal: AbortSignal): Promise<string>;
}

/** Draws a frame, waits, and again, until `signal` aborts; then closes the writer and resolves. */
export async function watch(options: WatchOptions): Promise<void> {
  const { signal, writer } = options;
  try {
    while (!signal.aborted) {
      let frame: string | typeof ABORTED;
      try {
        frame = await untilAborted(options.frame(signal), signal);
      } catch (err) {
        if (signal.aborted) break;
        throw err;
      }
      if (frame === ABORTED) break;
      writer.draw(frame);
      try {
        await sleep(options.intervalMs, undefined, { signal });
      } catch {
        // aborted: the loop condition ends it
      }
    }
  } finally {
    writer.close();
  }
}
