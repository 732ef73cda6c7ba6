/**
 * Text that comes from storage (a holder's name, a failure's reason) is shown on terminals and
 * written to logs. A forged value must not drive the terminal: its control characters are shown
 * as escapes, and the JSON output keeps it exact.
 */
import { beforeAll, describe, expect, it } from 'vitest';
import { createBatonRuntime } from '../../src/app/runtime';
import type { ShowView, StatusView } from '../../src/hub/read-model';
import { visible } from '../../src/visible';
import { useAzurite } from '../support/azurite';
import { runCli, seedHub, tempCwd, type SeededHub } from '../support/cli-harness';

const ESC = '\u001b';
const BEL = '\u0007';
const forged = {
  // Retitles the window.
  leader: `evil${ESC}]0;owned${BEL}`,
  // Clears the screen, sets the clipboard, and starts a line of its own.
  failureReason: `boom${ESC}[2J${ESC}]52;c;cm0gLXJmIH4=${BEL}\r\nok: nothing failed`,
  // Moves the cursor up and reverses the text after it.
  skipReason: `overlap${ESC}[1A\u202eevil`,
};
/** What no human view may hold: every control character but its own line breaks. */
const CONTROL = /[\u0000-\u0009\u000b-\u001f\u007f-\u009f\u202a-\u202e\u2066-\u2069]/;

const azurite = useAzurite();
let seed: SeededHub;
beforeAll(async () => {
  seed = await seedHub(azurite.blobService, azurite.leaseBlobService, azurite.uniqueName('forged'), forged);
});

async function cli(...argv: string[]): Promise<string> {
  const dir = tempCwd();
  try {
    const result = await runCli(
      ['--connection', azurite.azurite.connectionString, '--hub', seed.hub, '--timeout', '60', ...argv],
      {
        env: {},
        cwd: dir.path,
      },
    );
    expect(result.err).toBe('');
    expect(result.code).toBe(0);
    return result.out;
  } finally {
    dir.dispose();
  }
}

describe('text from storage on a terminal', () => {
  it('status, show and runs print forged text with its control characters as escapes', async () => {
    const status = await cli('status');
    const ended = await cli('show', seed.finishedRunId);
    const open = await cli('show', seed.activeRunId);
    const runs = await cli('runs');
    for (const out of [status, ended, open, runs]) expect(out).not.toMatch(CONTROL);
    expect(status).toContain('evil\\u001b]0;owned\\u0007');
    // (An open run's failures are listed once it ends.)
    expect(ended).toContain('boom\\u001b[2J\\u001b]52;c;cm0gLXJmIH4=\\u0007');
  });

  it('--json keeps the text exactly as stored', async () => {
    const status = JSON.parse(await cli('status', '--json')) as StatusView;
    expect(status.leader?.identity).toBe(forged.leader);
    const show = JSON.parse(await cli('show', seed.finishedRunId, '--json')) as ShowView;
    expect(JSON.stringify(show)).toContain(JSON.stringify(forged.failureReason).slice(1, -1));
  });

  it("the app's log lines carry no control character either", async () => {
    const lines: string[] = [];
    const runtime = createBatonRuntime(
      { AzureWebJobsStorage: azurite.azurite.connectionString, BATON_HUB: seed.hub },
      { logger: { info: (m) => lines.push(m), warn: (m) => lines.push(m) } },
    );
    runtime.log.warn(`run x: finalize hook failed: ${forged.failureReason}`);
    expect(lines).toEqual([`run x: finalize hook failed: ${visible(forged.failureReason)}`]);
    expect(lines[0]).not.toMatch(CONTROL);
    expect(lines[0]).not.toContain('\n');
    await runtime.shutdown();
  });
});

describe('visible', () => {
  it.each([
    ['plain text', 'plain text'],
    ['a\nb', 'a\\nb'],
    ['tab\there', 'tab\\there'],
    [`${ESC}[31mred`, '\\u001b[31mred'],
    ['\u009b2J', '\\u009b2J'],
    ['\u202eevil', '\\u202eevil'],
    ['ünïcödé ✓', 'ünïcödé ✓'],
  ])('%j → %j', (text, shown) => {
    expect(visible(text)).toBe(shown);
  });

  it('keeps line breaks when asked, and nothing else', () => {
    expect(visible(`a\nb${ESC}c\r`, { keepNewlines: true })).toBe('a\nb\\u001bc\\r');
  });
});
