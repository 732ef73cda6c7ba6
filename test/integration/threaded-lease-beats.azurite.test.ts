/**
 * `ThreadedLeaseBeats` against a real blob lease: its beats change the record's version, never
 * meet a holder write made through `exclusive`, stop when asked, and report a lease that is gone.
 * (That they go on while the holder's loop is held is lease-beats-thread.azurite.test.ts.)
 */
import { spawn } from 'node:child_process';
import { createServer, type AddressInfo, type Socket } from 'node:net';
import { randomUUID } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import { setTimeout as sleep } from 'node:timers/promises';
import { describe, expect, it } from 'vitest';
import { LeaseLostError } from '../../src/errors';
import { BlobLeaseStore } from '../../src/lease/blob-lease-store';
import { ThreadedLeaseBeats } from '../../src/lease/threaded-lease-beats';
import { StorageRequestCounter } from '../../src/storage/request-counter';
import { useAzurite } from '../support/azurite';
import { patience } from '../support/slowdown';

const fixture = useAzurite();

async function leased() {
  const storage = { kind: 'connectionString', connectionString: fixture.azurite.connectionString } as const;
  const blobName = fixture.uniqueName('hub');
  const store = new BlobLeaseStore(fixture.leaseBlobService, blobName);
  const leaseId = randomUUID();
  await store.acquire(leaseId, 15);
  const counter = new StorageRequestCounter();
  const beats = new ThreadedLeaseBeats({ storage, containerName: 'leases', blobName, requestCounter: counter });
  return { store, leaseId, beats, counter, blobName };
}

async function until(what: string, found: () => boolean | Promise<boolean>, timeoutMs = 20_000): Promise<void> {
  const deadline = Date.now() + patience(timeoutMs);
  while (!(await found())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(20);
  }
}

/** A child process running `script` (ESM, TypeScript imports) with `connection` in its env. */
function child(script: string, connection: string) {
  const proc = spawn(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], {
    env: { ...process.env, BATON_TEST_CONNECTION: connection },
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  const said = { out: '', err: '' };
  proc.stdout.setEncoding('utf8').on('data', (chunk: string) => (said.out += chunk));
  proc.stderr.setEncoding('utf8').on('data', (chunk: string) => (said.err += chunk));
  const exited = new Promise<number | null>((done) => proc.once('exit', (code) => done(code)));
  /** That it printed `stopped` and exited 0 by itself, within a loose bound. */
  const stoppedAndExited = async () => {
    const bound = sleep(patience(20_000)).then(() => 'still running' as const);
    const outcome = await Promise.race([exited, bound]);
    if (outcome === 'still running') proc.kill('SIGKILL');
    expect(said.out, said.err).toContain('stopped');
    expect(outcome, said.err).toBe(0);
  };
  return { proc, stoppedAndExited };
}

describe('ThreadedLeaseBeats on a blob lease', () => {
  it('beats change the version, and each is counted as the holder’s request', async () => {
    const { store, leaseId, beats, counter } = await leased();
    const before = (await store.read()).version;
    const run = beats.start(leaseId, { everyMs: 50, timeoutMs: 2000, onRefused: () => undefined });
    try {
      await until('three beats', () => counter.total >= 3);
      expect((await store.read()).version).not.toBe(before);
      expect(counter.snapshot()).toEqual({ 'blob.properties': counter.total });
    } finally {
      await run.stop();
    }
  });

  it('no beat lands inside a holder write made through exclusive', async () => {
    const { store, leaseId, beats, counter } = await leased();
    const run = beats.start(leaseId, { everyMs: 5, timeoutMs: 2000, onRefused: () => undefined });
    try {
      await until('beats', () => counter.total >= 2);
      // Each mark reads the record and writes it conditional on the ETag it read: a beat between
      // the two would refuse the write (ConcurrentUpdateError). 40 rounds, each entered only once
      // a beat has landed since the last (back to back, the rounds would hold the thread off
      // almost always, and on a busy machine past the lease's 15 s), so every round meets a
      // thread that is beating.
      for (let i = 0; i < 40; i++) {
        const beatsBefore = counter.total;
        await until('a beat between two holder writes', () => counter.total > beatsBefore);
        await run.exclusive(() => store.mark(leaseId, { kind: 'resting', until: new Date(Date.now() + 60_000) }));
        // Read and compared under exclusion too: nothing wrote between the two reads.
        await run.exclusive(async () => {
          const a = (await store.read()).version;
          await sleep(10);
          expect((await store.read()).version).toBe(a);
        });
      }
    } finally {
      await run.stop();
    }
  });

  it('stop settles with no beat in flight, and none follows', async () => {
    const { store, leaseId, beats, counter } = await leased();
    const run = beats.start(leaseId, { everyMs: 10, timeoutMs: 2000, onRefused: () => undefined });
    await until('beats', () => counter.total >= 3);
    await run.stop();
    const stoppedAt = (await store.read()).version;
    const counted = counter.total;
    // Another lease's run on the same thread, started after the stop: once it has beaten five
    // times at the same pace, a beat the stopped run still had scheduled would have landed.
    const other = await leased();
    const witness = other.beats.start(other.leaseId, { everyMs: 10, timeoutMs: 2000, onRefused: () => undefined });
    try {
      await until('the other run to beat five times', () => other.counter.total >= 5);
    } finally {
      await witness.stop();
    }
    expect((await store.read()).version).toBe(stoppedAt);
    expect(counter.total).toBe(counted);
  });

  it('never keeps the process alive: one that beat and stopped exits by itself', async () => {
    const { leaseId, blobName } = await leased();
    const source = fileURLToPath(new URL('../../src/lease/threaded-lease-beats.ts', import.meta.url));
    const script = `
      const { ThreadedLeaseBeats } = await import(${JSON.stringify(source)});
      let beats = 0;
      const counter = { record: () => beats++ };
      const storage = { kind: 'connectionString', connectionString: process.env.BATON_TEST_CONNECTION };
      const run = new ThreadedLeaseBeats({ storage, containerName: 'leases', blobName: ${JSON.stringify(blobName)}, requestCounter: counter })
        .start(${JSON.stringify(leaseId)}, { everyMs: 20, timeoutMs: 2000, onRefused: () => undefined });
      await new Promise((resolve) => { const t = setInterval(() => { if (beats >= 2) { clearInterval(t); resolve(); } }, 10); });
      await run.stop();
      console.log('stopped');
    `;
    await child(script, fixture.azurite.connectionString).stoppedAndExited();
  });

  // The thread is unref'd and a pending Atomics.waitAsync holds nothing open, so a stop that
  // waits for a beat in flight could see its process exit under it, the stop never settled.
  it('a stop that waits for a beat in flight settles, even with nothing else holding the process', async () => {
    // Storage that takes the beat and never answers: the beat is in flight for its whole bound.
    const sockets = new Set<Socket>();
    let beatArrived = false;
    const silent = createServer((socket) => {
      sockets.add(socket);
      socket.once('data', () => (beatArrived = true));
    });
    await new Promise<void>((ready) => silent.listen(0, '127.0.0.1', ready));
    const { port } = silent.address() as AddressInfo;
    const source = fileURLToPath(new URL('../../src/lease/threaded-lease-beats.ts', import.meta.url));
    // The stop comes when the test says, on stdin; then nothing but the stop is left to run.
    const script = `
      const { ThreadedLeaseBeats } = await import(${JSON.stringify(source)});
      const storage = { kind: 'connectionString', connectionString: process.env.BATON_TEST_CONNECTION };
      const run = new ThreadedLeaseBeats({ storage, containerName: 'leases', blobName: 'hub' })
        .start('lease-id', { everyMs: 20, timeoutMs: 1500, onRefused: () => undefined });
      await new Promise((resolve) => process.stdin.once('data', resolve));
      process.stdin.destroy();
      await run.stop();
      console.log('stopped');
    `;
    const connection = fixture.azurite.connectionString.replace(
      /BlobEndpoint=[^;]+/,
      `BlobEndpoint=http://127.0.0.1:${port}/devstoreaccount1`,
    );
    const stopping = child(script, connection);
    try {
      await until('a beat to reach storage', () => beatArrived);
      stopping.proc.stdin.end('stop\n');
      await stopping.stoppedAndExited();
    } finally {
      stopping.proc.kill('SIGKILL');
      for (const socket of sockets) socket.destroy();
      await new Promise((closed) => silent.close(closed));
    }
  });

  it('a beat on a lease that is gone is reported as refused, as a LeaseLostError', async () => {
    const { leaseId, beats, blobName } = await leased();
    const refused: LeaseLostError[] = [];
    await fixture.blobService.getContainerClient('leases').getBlobClient(blobName).getBlobLeaseClient().breakLease(0);
    const run = beats.start(leaseId, { everyMs: 20, timeoutMs: 2000, onRefused: (error) => refused.push(error) });
    try {
      await until('a refusal', () => refused.length > 0);
      expect(refused[0]).toBeInstanceOf(LeaseLostError);
    } finally {
      await run.stop();
    }
  });
});
