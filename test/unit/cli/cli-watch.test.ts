import { describe, expect, it } from 'vitest';
import { InvalidArgumentError } from 'commander';
import {
  frameWriter,
  HIDE_CURSOR,
  parseInterval,
  rowsOf,
  SHOW_CURSOR,
  watch,
  watchHeader,
  type TerminalSize,
} from '../../../src/cli/watch';

const ESC = '\u001b';

/** What the writer sees of a terminal: its size, which a test can change, and what was written. */
function fakeTty(size: TerminalSize) {
  const writes: string[] = [];
  return {
    size,
    writes,
    writer: frameWriter(
      (text) => writes.push(text),
      () => size,
    ),
  };
}

function fakePipe() {
  const writes: string[] = [];
  return {
    writes,
    writer: frameWriter(
      (text) => writes.push(text),
      () => undefined,
    ),
  };
}

describe('--interval', () => {
  it.each([
    ['0.5', 0.5],
    ['2', 2],
    ['1.25', 1.25],
    ['.75', 0.75],
    [' 3 ', 3],
    ['3600', 3600],
  ])('accepts %j as %d seconds', (value, seconds) => {
    expect(parseInterval(value)).toBe(seconds);
  });

  it.each(['0.4', '0', '-1', '3601', 'abc', '2s', '500ms', '', '1e1', 'Infinity', 'NaN', '0x10', '1.'])(
    'refuses %j, naming the range',
    (value) => {
      expect(() => parseInterval(value)).toThrow(InvalidArgumentError);
      expect(() => parseInterval(value)).toThrow('must be seconds from 0.5 to 3600, such as 2 or 0.5');
    },
  );
});

describe('the frame writer on a terminal', () => {
  it('hides the cursor, redraws each frame over the last one, and shows the cursor at the end', () => {
    const tty = fakeTty({ columns: 80, rows: 24 });
    tty.writer.draw('one\ntwo\n');
    tty.writer.draw('three\n\nfour\nfive\n');
    tty.writer.draw('six\n');
    tty.writer.close();
    tty.writer.close();

    expect(tty.writer.interactive).toBe(true);
    expect(tty.writes).toEqual([
      `${HIDE_CURSOR}one\ntwo\n`,
      // Back to column 1, up over the 2 rows drawn, erase to the end of the screen, draw.
      `\r${ESC}[2A${ESC}[Jthree\n\nfour\nfive\n`,
      `\r${ESC}[4A${ESC}[Jsix\n`,
      SHOW_CURSOR,
    ]);
  });

  it('counts the rows a long line wraps onto, with the width the terminal has now', () => {
    const tty = fakeTty({ columns: 10, rows: 24 });
    tty.writer.draw(`${'x'.repeat(25)}\n${'y'.repeat(10)}\n`);
    tty.writer.draw('b\n');
    // 25 characters take 3 rows of 10; exactly 10 take one.
    expect(tty.writes[1]?.startsWith(`\r${ESC}[4A${ESC}[J`)).toBe(true);
  });

  it('clears the screen and draws from the top once a frame no longer fits below the cursor', () => {
    const tty = fakeTty({ columns: 80, rows: 5 });
    tty.writer.draw('1\n2\n3\n4\n');
    tty.writer.draw('1\n2\n3\n4\n5\n');
    tty.writer.draw('1\n');
    expect(tty.writes[1]?.startsWith(`\r${ESC}[4A${ESC}[J`)).toBe(true);
    // 5 rows on a 5-row screen: the first has scrolled above the top, where the cursor cannot go.
    expect(tty.writes[2]?.startsWith(`${ESC}[H${ESC}[2J1\n`)).toBe(true);
  });

  it('writes no cursor codes when it never drew', () => {
    const tty = fakeTty({ columns: 80, rows: 24 });
    tty.writer.close();
    expect(tty.writes).toEqual([]);
  });
});

describe('the frame writer on a pipe', () => {
  it('prints every frame in full with a blank line between them, and no escape codes', () => {
    const pipe = fakePipe();
    pipe.writer.draw('one\n');
    pipe.writer.draw('two\n');
    pipe.writer.close();
    expect(pipe.writer.interactive).toBe(false);
    expect(pipe.writes.join('')).toBe('one\n\ntwo\n');
  });
});

describe('rowsOf and the header', () => {
  it('counts a blank line as a row and the final newline as none', () => {
    expect(rowsOf('a\n\nb\n', 80)).toBe(3);
    expect(rowsOf('a', 80)).toBe(1);
    expect(rowsOf('abc\n', 2)).toBe(2);
  });

  it('names the time of the read and the interval, and how to stop only on a terminal', () => {
    const at = new Date('2026-05-01T10:00:00.000Z');
    expect(watchHeader('baton status', at, 2, true)).toBe('baton status at 2026-05-01T10:00:00.000Z  (every 2s; Ctrl-C stops)');
    expect(watchHeader('baton status', at, 0.5, false)).toBe('baton status at 2026-05-01T10:00:00.000Z  (every 0.5s)');
  });
});

describe('watch', () => {
  it('draws frames until the signal aborts, aborting a read that would never end, and restores the cursor', async () => {
    const tty = fakeTty({ columns: 80, rows: 24 });
    const stop = new AbortController();
    let reads = 0;
    let sawAbort = false;
    const watching = watch({
      intervalMs: 1,
      signal: stop.signal,
      writer: tty.writer,
      frame: (signal) => {
        reads++;
        if (reads < 3) return Promise.resolve(`frame ${reads}\n`);
        // The third read hangs, heeding its signal only to record that it got it.
        signal.addEventListener('abort', () => (sawAbort = true));
        queueMicrotask(() => stop.abort());
        return new Promise<string>(() => undefined);
      },
    });
    await watching;
    expect(sawAbort).toBe(true);
    expect(tty.writes.map((w) => w.replace(/\u001b\[[0-9;?]*[A-Za-z]|\r/g, ''))).toEqual(['frame 1\n', 'frame 2\n', '']);
    expect(tty.writes.at(-1)).toBe(SHOW_CURSOR);
  });

  it('ends without a read when the signal has already aborted', async () => {
    const tty = fakeTty({ columns: 80, rows: 24 });
    let reads = 0;
    await watch({
      intervalMs: 1,
      signal: AbortSignal.abort(),
      writer: tty.writer,
      frame: () => Promise.resolve(`frame ${++reads}\n`),
    });
    expect(reads).toBe(0);
    expect(tty.writes).toEqual([]);
  });

  it('ends with the error of a frame that fails on its own, with the cursor shown again', async () => {
    const tty = fakeTty({ columns: 80, rows: 24 });
    let reads = 0;
    const watching = watch({
      intervalMs: 1,
      signal: new AbortController().signal,
      writer: tty.writer,
      frame: () => (++reads === 1 ? Promise.resolve('frame\n') : Promise.reject(new Error('render bug'))),
    });
    await expect(watching).rejects.toThrow('render bug');
    expect(tty.writes.at(-1)).toBe(SHOW_CURSOR);
  });

  it('pauses for the interval between one read and the next', async () => {
    const stop = new AbortController();
    const starts: number[] = [];
    await watch({
      intervalMs: 200,
      signal: stop.signal,
      writer: fakePipe().writer,
      frame: () => {
        starts.push(performance.now());
        if (starts.length === 2) stop.abort();
        return Promise.resolve('frame\n');
      },
    });
    expect(starts).toHaveLength(2);
    // A lower bound only: a busy machine makes the pause longer, never shorter.
    expect((starts[1] ?? 0) - (starts[0] ?? 0)).toBeGreaterThanOrEqual(190);
  });
});
