/**
 * A holder whose event loop a task holds for longer than the takeover silence, as a real process
 * (test/integration/fixtures/blocking-holder.ts), against a candidate in this process. With the
 * elector's own beats the candidate breaks the lease mid-block: the busy holder looks dead. With
 * beats from a thread (`ThreadedLeaseBeats`) it does not, and the holder renews after the block
 * with the same epoch. Azurite runs here, not in the holder, so it answers while the holder is busy.
 */
import { afterAll, beforeAll, describe, expect, it, onTestFailed } from 'vitest';
import { spawn } from 'node:child_process';
import { dirname, resolve } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { setTimeout as sleep } from 'node:timers/promises';
import { startAzurite, type RunningAzurite } from '../../src/local/azurite';
import { BlobLeaseStore } from '../../src/lease/blob-lease-store';
import { LeaderElector } from '../../src/lease/leader-elector';
import type { LeaderEvent } from '../../src/lease/leader-events';
import { createBlobServiceClient, LEASE_RETRY_OPTIONS } from '../../src/storage/client-factory';
import { describePatience, patience } from '../support/slowdown';

const fixturePath = fileURLToPath(new URL('./fixtures/blocking-holder.ts', import.meta.url));
const projectRoot = resolve(dirname(fixturePath), '../../..');
/** The production default: beats every 750 ms, so a busy machine delaying the thread a little breaks nothing. */
const BREAK_AFTER_MS = 3000;
/** Twice the silence: the elector's own beats stop for all of it. */
const BLOCK_MS = 2 * BREAK_AFTER_MS;

interface Line {
  kind: string;
  type?: string;
  epoch?: number;
  reason?: string;
  at: number;
}

let azurite: RunningAzurite | undefined;
beforeAll(async () => {
  azurite = await startAzurite();
});
afterAll(async () => {
  await azurite?.close();
});

/** Runs one holder with `beats` and a candidate trying every 250 ms; returns both sides' record. */
async function holdWhileBlocked(
  beats: 'thread' | 'loop',
): Promise<{ holder: Line[]; candidate: LeaderEvent[]; candidateLed: number[] }> {
  const connectionString = azurite!.connectionString;
  const leaseName = `blocked-${beats}-${Date.now()}`;
  const holder: Line[] = [];
  const proc = spawn(process.execPath, ['--import', 'tsx', fixturePath], {
    cwd: projectRoot,
    stdio: ['ignore', 'pipe', 'pipe'],
    env: {
      ...process.env,
      BATON_TEST_CONNECTION: connectionString,
      BATON_TEST_LEASE: leaseName,
      BATON_TEST_BEATS: beats,
      BATON_TEST_BREAK_MS: String(BREAK_AFTER_MS),
      BATON_TEST_BLOCK_MS: String(BLOCK_MS),
    },
  });
  let stderr = '';
  proc.stderr!.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
  createInterface({ input: proc.stdout! }).on('line', (text) => holder.push({ ...(JSON.parse(text) as Line), at: Date.now() }));
  const exited = new Promise<void>((done) => proc.once('exit', () => done()));
  onTestFailed(() => {
    console.log(`holder (${beats}) said:\n${holder.map((l) => JSON.stringify(l)).join('\n')}\n${stderr}`);
  });
  const until = async (what: string, found: () => boolean, timeoutMs: number): Promise<void> => {
    const deadline = Date.now() + patience(timeoutMs);
    while (!found()) {
      if (Date.now() > deadline) throw new Error(`timed out after ${describePatience(timeoutMs)} waiting for ${what}`);
      await sleep(50);
    }
  };
  const seen = (kind: string, type?: string): boolean =>
    holder.some((l) => l.kind === kind && (type === undefined || l.type === type));
  const candidate: LeaderEvent[] = [];
  const candidateLed: number[] = [];
  try {
    await until('the holder to hold its loop', () => seen('blocking'), 30_000);
    const elector = new LeaderElector({
      store: new BlobLeaseStore(
        createBlobServiceClient({ kind: 'connectionString', connectionString }, { retryOptions: LEASE_RETRY_OPTIONS }),
        leaseName,
      ),
      identity: 'candidate',
      breakAfterMs: BREAK_AFTER_MS,
      onEvent: (event) => candidate.push(event),
    });
    // A follower's ticks through the block and a little after it.
    while (!seen('unblocked')) {
      const result = await elector.runIfLeader(async (leadership) => leadership.epoch);
      if (result.led) candidateLed.push(result.value);
      await sleep(250);
    }
    // The holder's next renewal, or its loss, says how the block ended for it.
    await until('the holder to renew or lose', () => seen('event', 'renewed') || seen('event', 'lost') || seen('ended'), 20_000);
  } finally {
    proc.kill('SIGKILL');
    await exited;
  }
  return { holder, candidate, candidateLed };
}

describe('a holder whose task holds its event loop', () => {
  it('with beats from a thread, is not taken over, and renews after the block with its epoch', async () => {
    const { holder, candidate, candidateLed } = await holdWhileBlocked('thread');
    expect(candidate.filter((e) => e.type === 'broke')).toEqual([]);
    expect(candidateLed).toEqual([]);
    const epoch = holder.find((l) => l.kind === 'blocking')!.epoch;
    const unblockedAt = holder.find((l) => l.kind === 'unblocked')!.at;
    const after = holder.filter((l) => l.kind === 'event' && l.at >= unblockedAt);
    expect(after.map((l) => l.type)).toContain('renewed');
    expect(after.filter((l) => l.type === 'lost')).toEqual([]);
    expect(after.every((l) => l.epoch === epoch)).toBe(true);
  }, 90_000);

  it("with the elector's own beats, is broken mid-block (the busy holder looks dead) and learns it after", async () => {
    const { holder, candidate, candidateLed } = await holdWhileBlocked('loop');
    const epoch = holder.find((l) => l.kind === 'blocking')!.epoch!;
    expect(candidate.filter((e) => e.type === 'broke').length).toBeGreaterThan(0);
    expect(candidateLed.length).toBeGreaterThan(0);
    expect(Math.min(...candidateLed)).toBeGreaterThan(epoch);
    expect(holder.some((l) => (l.kind === 'event' && l.type === 'lost') || l.kind === 'ended')).toBe(true);
  }, 90_000);
});
