/**
 * `baton status --watch` as a user runs it: the real CLI process against Azurite, its stdout a
 * pipe, stopped with a signal. Every wait is on what it printed; the bounds are loose, for a busy
 * 2-core machine where starting the process alone can take seconds.
 */
import { createServer, type Socket } from 'node:net';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { FencedDocuments } from '../../src/fencing/fenced-documents';
import { main } from '../../src/cli/main';
import { HIDE_CURSOR, SHOW_CURSOR, type TerminalIo } from '../../src/cli/watch';
import { runKeys, runRecordSchema, type RunRecord } from '../../src/hub/run-record';
import { useAzurite } from '../support/azurite';
import {
  azuriteStyleConnection,
  closedPort,
  OutputLog,
  seedHub,
  spawnCli,
  tempCwd,
  type SeededHub,
  type SpawnedCli,
} from '../support/cli-harness';
import { patience } from '../support/slowdown';
import { timeBound } from '../support/time-bound';

const azurite = useAzurite();
/** Process start (tsx compiling the CLI) plus a few reads, on a loaded machine; waits scale it by `patience`. */
const FRAMES_WITHIN_MS = 60_000;
/** The CLI gives its output up to 2 s to drain before it exits (src/cli/main.ts): a timer, on any machine. */
const DRAIN_MS = 2_000;
/**
 * From the signal to the exit: the drain, and then some. The wait for the exit scales it by
 * `patience`; the bound asserted on how long the exit took scales all of it but the drain, by a
 * floor measured in that test.
 */
const EXIT_WITHIN_MS = 20_000;
/**
 * A read given `--timeout 60` that did not heed the stop could hold the exit for 60 s; an exit
 * bound at or past that could no longer tell a watch that stops at once from one that waits it out.
 */
const EXIT_CAP_MS = 55_000;

let accountKey: string;
const spawned: SpawnedCli[] = [];

beforeAll(() => {
  accountKey = /AccountKey=([^;]+)/.exec(azurite.azurite.connectionString)?.[1] ?? '';
  expect(accountKey).not.toBe('');
});

afterEach(() => {
  for (const cli of spawned.splice(0)) cli.kill();
});

/** Each test its own hub: one changes its run, and frames must not see another test's change. */
const seed = () => seedHub(azurite.blobService, azurite.leaseBlobService, azurite.uniqueName('watch'));

function watchCli(connection: string, hub: string, ...extra: string[]): SpawnedCli {
  // A patient per-call deadline: a busy Azurite must not turn a frame into an error frame.
  const cli = spawnCli(['status', '--watch', '--interval', '0.5', '--connection', connection, '--hub', hub, ...extra]);
  spawned.push(cli);
  return cli;
}

const HEADER = /^baton status at (\S+) {2}\(every 0\.5s\)$/gm;

/** The frames printed so far, each from its header line to the next. */
function frames(text: string): string[] {
  const starts = [...text.matchAll(HEADER)].map((m) => m.index);
  return starts.map((start, i) => text.slice(start, starts[i + 1]));
}

function expectNoSecrets(text: string): void {
  expect(text).not.toContain(accountKey.slice(0, 16));
  expect(text).not.toMatch(/AccountKey=(?!\*\*\*)/i);
}

describe('baton status --watch, piped', () => {
  it('prints a frame per read, the next one showing a change made in between, until SIGINT ends it with exit 0', async () => {
    const hub: SeededHub = await seed();
    const cli = watchCli(azurite.azurite.connectionString, hub.hub, '--timeout', '60');

    await cli.out.until(
      (t) => frames(t).some((f) => f.includes('7/10 70% (1 failed)')),
      patience(FRAMES_WITHIN_MS),
      'a first frame',
    );
    const before = frames(cli.out.text).length;

    // What a leader does as results come in: two more items succeed.
    const records = new FencedDocuments<RunRecord>(hub.docs, { parse: (v) => runRecordSchema.parse(v) });
    await records.update(
      runKeys.record(hub.activeRunId),
      hub.epoch,
      (run) => run && { ...run, counters: { ...run.counters, succeeded: 8 } },
    );
    await cli.out.until(
      (t) => frames(t).some((f) => f.includes('9/10 90% (1 failed)')),
      patience(FRAMES_WITHIN_MS),
      'a frame with the change',
    );

    const slack = await timeBound(EXIT_WITHIN_MS - DRAIN_MS);
    const exitWithinMs = Math.min(DRAIN_MS + slack.ms, EXIT_CAP_MS);
    const why = `exit within ${exitWithinMs} ms = ${DRAIN_MS} ms drain + slack (${slack.why}), capped at ${EXIT_CAP_MS} ms`;
    const sent = Date.now();
    process.kill(cli.pid, 'SIGINT');
    const exit = await cli.exited(Math.max(patience(EXIT_WITHIN_MS), exitWithinMs));
    expect(exit).toEqual({ code: 0, signal: null });
    expect(Date.now() - sent, why).toBeLessThan(exitWithinMs);

    const all = frames(cli.out.text);
    const changedAt = all.findIndex((f) => f.includes('9/10 90%'));
    expect(changedAt).toBeGreaterThanOrEqual(before);
    // Every frame before the change shows the old count, with the leader and the run.
    for (const frame of all.slice(0, changedAt)) {
      expect(frame).toContain('7/10 70% (1 failed)');
      expect(frame).toContain(`epoch ${hub.epoch}`);
      expect(frame).toContain(hub.activeRunId);
    }
    // The header's time is the time of each read, so the frames' times go forward.
    const times = [...cli.out.text.matchAll(HEADER)].map((m) => Date.parse(m[1] ?? ''));
    expect(times.every((t, i) => !Number.isNaN(t) && (i === 0 || t >= (times[i - 1] ?? 0)))).toBe(true);
    // A pipe gets plain frames with a blank line between them: nothing for a terminal.
    expect(cli.out.text).not.toContain('\u001b');
    expect(cli.out.text).toContain('\n\nbaton status at ');
    expect(cli.out.text.startsWith('baton status at ')).toBe(true);
    expect(cli.err.text).toBe('');
  });

  it('a read that fails is a one-line error in its frame, masked, and the watch goes on', async () => {
    const port = await closedPort();
    const cli = watchCli(azuriteStyleConnection(port, accountKey), 'anyhub');
    const line = `baton: cannot reach blob storage at http://127.0.0.1:${port}/devstoreaccount1 (ECONNREFUSED).`;
    await cli.out.until(
      (t) => frames(t).filter((f) => f.includes(line)).length >= 2,
      patience(FRAMES_WITHIN_MS),
      'two error frames',
    );

    process.kill(cli.pid, 'SIGTERM');
    expect(await cli.exited(patience(EXIT_WITHIN_MS))).toEqual({ code: 0, signal: null });
    for (const frame of frames(cli.out.text)) {
      const body = frame.split('\n').filter((l) => l !== '');
      expect(body).toHaveLength(2);
      expect(body[1]).toContain(line);
    }
    expectNoSecrets(cli.out.text);
    expect(cli.err.text).toBe('');
  });

  it('SIGTERM during a read that gets no answer ends it at once, not at the storage deadline', async () => {
    // Accepts connections and never answers; says when the CLI's read has reached it.
    const sockets = new Set<Socket>();
    const reached = new OutputLog();
    const server = createServer((socket) => {
      sockets.add(socket);
      reached.write('connected\n');
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    try {
      const port = (server.address() as { port: number }).port;
      const cli = watchCli(azuriteStyleConnection(port, accountKey), 'anyhub', '--timeout', '600');
      await reached.until((t) => t.includes('connected'), patience(FRAMES_WITHIN_MS), 'a connection from the CLI');

      process.kill(cli.pid, 'SIGTERM');
      expect(await cli.exited(patience(EXIT_WITHIN_MS))).toEqual({ code: 0, signal: null });
      // It never got to draw: no answer came.
      expect(cli.out.text).toBe('');
      expect(cli.err.text).toBe('');
    } finally {
      for (const socket of sockets) socket.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    }
  });
});

describe('baton status --watch on a terminal', () => {
  const cwds: ReturnType<typeof tempCwd>[] = [];
  afterAll(() => {
    for (const dir of cwds.splice(0)) dir.dispose();
  });

  it('redraws in place with the cursor hidden, and shows it again when the watch ends', async () => {
    const hub = await seed();
    const out = new OutputLog();
    const writes: string[] = [];
    const stdoutGone = new AbortController();
    // A terminal as the CLI sees one; closing it ends the watch as a closed stdout does.
    const io: TerminalIo = {
      out: (text) => {
        writes.push(text);
        out.write(text);
      },
      err: (text) => out.write(`stderr: ${text}`),
      terminal: () => ({ columns: 200, rows: 60 }),
      closed: stdoutGone.signal,
    };
    const dir = tempCwd();
    cwds.push(dir);
    const exit = main(
      [
        '--connection',
        azurite.azurite.connectionString,
        '--hub',
        hub.hub,
        '--timeout',
        '60',
        'status',
        '--watch',
        '--interval',
        '0.5',
      ],
      io,
      { env: {}, cwd: dir.path },
    );
    await out.until((t) => t.split('baton status at ').length > 3, patience(FRAMES_WITHIN_MS), 'three frames');
    stdoutGone.abort();
    expect(await exit).toBe(0);

    expect(out.text).not.toContain('stderr:');
    const [first, second, ...rest] = writes;
    expect(first?.startsWith(`${HIDE_CURSOR}baton status at `)).toBe(true);
    expect(first).toContain('(every 0.5s; Ctrl-C stops)');
    expect(first).toContain('7/10 70% (1 failed)');
    // The next frame moves up over every row the first one drew, erases them, and draws.
    const rows = (first ?? '').replace(HIDE_CURSOR, '').split('\n').length - 1;
    expect(second?.startsWith(`\r\u001b[${rows}A\u001b[Jbaton status at `)).toBe(true);
    expect(rest.at(-1)).toBe(SHOW_CURSOR);
    expect(writes.filter((w) => w.includes(HIDE_CURSOR))).toHaveLength(1);
  });
});
