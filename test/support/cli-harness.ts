import { spawn } from 'node:child_process';
import { indexRun } from '../../src/hub/run-index';
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Server, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { BlobServiceClient } from '@azure/storage-blob';
import { hubResources } from '../../src/hub/resources';
import type { FailuresManifest, RunOutput } from '../../src/hub/run-output';
import { appendFailures } from '../../src/hub/failure-log';
import { jobStateKey, newJobState, type JobState } from '../../src/hub/job-state';
import { BlobDocumentStore } from '../../src/fencing/blob-document-store';
import { FencedDocuments } from '../../src/fencing/fenced-documents';
import { BlobLeaseStore } from '../../src/lease/blob-lease-store';
import { main, type CliOptions } from '../../src/cli/main';
import { redactSecrets } from '../../src/redact';
import { newRunRecord, runKeys, runRecordSchema, scheduledRunId, transition, type RunRecord } from '../../src/hub/run-record';
import type { Env } from '../../src/storage/setting';
import { cliPath, projectRoot, requireCurrentDist } from './cluster-process';

export interface CliResult {
  code: number;
  out: string;
  err: string;
  ms: number;
}

/** Runs the CLI in-process and captures what it writes. */
export async function runCli(argv: string[], options: CliOptions & { env: Env; cwd: string }): Promise<CliResult> {
  let out = '';
  let err = '';
  const started = Date.now();
  const code = await main(argv, { out: (s) => void (out += s), err: (s) => void (err += s) }, options);
  return { code, out, err, ms: Date.now() - started };
}

/** An empty working directory (so no local.settings.json), removed by `dispose`. */
export function tempCwd(): { path: string; writeLocalSettings(values: Record<string, string>): void; dispose(): void } {
  const path = mkdtempSync(join(tmpdir(), 'baton-cli-'));
  return {
    path,
    writeLocalSettings: (values) =>
      writeFileSync(join(path, 'local.settings.json'), JSON.stringify({ IsEncrypted: false, Values: values }, null, 2)),
    dispose: () => rmSync(path, { recursive: true, force: true }),
  };
}

/** A TCP port nothing listens on (bound once, then closed). */
export async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as { port: number }).port;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

/** A server that accepts connections and never answers, like a blackholed endpoint. */
export async function silentServer(): Promise<{ port: number; close(): Promise<void> }> {
  const sockets = new Set<Socket>();
  const server: Server = createServer((socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    port: (server.address() as { port: number }).port,
    close: async () => {
      for (const socket of sockets) socket.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

/** A connection string with the public Azurite key, for an endpoint on `port`. */
export function azuriteStyleConnection(port: number, accountKey: string): string {
  const endpoint = `http://127.0.0.1:${port}/devstoreaccount1`;
  return `DefaultEndpointsProtocol=http;AccountName=devstoreaccount1;AccountKey=${accountKey};BlobEndpoint=${endpoint};QueueEndpoint=${endpoint};`;
}

export interface SeededHub {
  hub: string;
  leader: string;
  epoch: number;
  job: string;
  activeRunId: string;
  finishedRunId: string;
  docs: BlobDocumentStore;
}

/**
 * A hub as a leader leaves it mid-run: the lease held with a known holder and epoch, a job
 * state listing an open run, that run's record, and an earlier run that finished with an
 * output and a failures manifest. Written the way the engine writes them.
 */
export async function seedHub(
  blobService: BlobServiceClient,
  leaseBlobService: BlobServiceClient,
  hub: string,
  /** Text a forged hub would hold instead of the usual (the leader's name, failure and skip reasons). */
  text: { leader?: string; failureReason?: string; skipReason?: string } = {},
): Promise<SeededHub> {
  const job = 'audit';
  const leader = text.leader ?? 'instance-b';
  const lease = new BlobLeaseStore(leaseBlobService, hub);
  const leaseId = randomUUID();
  // An infinite lease: the seed must not expire while the file's tests run.
  await lease.acquire(leaseId, -1);
  await lease.bumpEpoch(leaseId, 'instance-a');
  const epoch = await lease.bumpEpoch(leaseId, leader, { rank: { version: '1.4.2', priority: 3 } });

  const docs = new BlobDocumentStore(blobService.getContainerClient(hubResources(hub).container));
  const records = new FencedDocuments<RunRecord>(docs, { parse: (v) => runRecordSchema.parse(v) });
  const now = Date.now();

  // The earlier run: ran to the end with one failed item, in its failure log.
  const finishedAt = new Date(now - 10 * 60_000);
  const finishedRunId = scheduledRunId(job, finishedAt);
  let finished = newRunRecord({
    runId: finishedRunId,
    job,
    trigger: 'schedule',
    occurrence: finishedAt,
    now: finishedAt,
    timeoutSeconds: 3600,
  });
  for (const to of ['dispatching', 'running', 'finalizing', 'succeeded'] as const) {
    finished = transition(finished, to, new Date(finishedAt.getTime() + 30_000));
  }
  const finishedFailures = [{ item: 2, reason: text.failureReason ?? 'Content-MD5 mismatch', attempts: 5 }];
  const finishedParts = await appendFailures(docs, { runId: finishedRunId, epoch, roots: [], failures: finishedFailures });
  finished = {
    ...finished,
    failureParts: finishedParts,
    planEpoch: epoch,
    counters: { planned: 4, dispatched: 4, succeeded: 3, failed: 1, duplicates: 0, rejected: 0 },
    outputKey: runKeys.output(finishedRunId),
    manifestKey: runKeys.manifest(finishedRunId),
  };
  await indexRun(docs, epoch, finished);
  await records.create(runKeys.record(finishedRunId), epoch, finished);
  const output: RunOutput = {
    runId: finishedRunId,
    job,
    occurrence: finished.occurrence,
    state: 'succeeded',
    counters: finished.counters,
    output: { blobs: 3, bytes: 300 },
  };
  const manifest: FailuresManifest = {
    runId: finishedRunId,
    state: 'succeeded',
    failedCount: 1,
    failureParts: finishedParts,
    missing: [],
    missingCount: 0,
  };
  await docs.write(runKeys.output(finishedRunId), JSON.stringify(output), { ifNoneMatch: '*' });
  await docs.write(runKeys.manifest(finishedRunId), JSON.stringify(manifest), { ifNoneMatch: '*' });

  // The open run: 7 of 10 items back, one of them failed, so far in its record's failure log only.
  const occurrence = new Date(now - 60_000);
  const activeRunId = scheduledRunId(job, occurrence);
  const activeFailures = [{ item: 4, reason: text.failureReason ?? 'blob not found', attempts: 5 }];
  let active = newRunRecord({ runId: activeRunId, job, trigger: 'schedule', occurrence, now: occurrence, timeoutSeconds: 3600 });
  active = transition(transition(active, 'dispatching', occurrence), 'running', occurrence);
  active = {
    ...active,
    planEpoch: epoch,
    counters: { planned: 10, dispatched: 10, succeeded: 6, failed: 1, duplicates: 0, rejected: 0 },
    failureParts: await appendFailures(docs, { runId: activeRunId, epoch, roots: [], failures: activeFailures }),
  };
  await indexRun(docs, epoch, active);
  await records.create(runKeys.record(activeRunId), epoch, active);

  const state: JobState = {
    ...newJobState(job),
    lastChecked: new Date(now - 5_000).toISOString(),
    active: [activeRunId],
    recent: [
      { at: finishedAt.toISOString(), occurrence: finishedAt.toISOString(), outcome: 'started', runId: finishedRunId },
      {
        at: new Date(now - 5 * 60_000).toISOString(),
        occurrence: new Date(now - 5 * 60_000).toISOString(),
        outcome: 'skipped',
        reason: text.skipReason ?? 'overlap: a run is open',
      },
      {
        at: new Date(now - 4 * 60_000).toISOString(),
        occurrence: new Date(now - 4 * 60_000).toISOString(),
        outcome: 'missed',
        reason: 'no leader',
      },
      { at: occurrence.toISOString(), occurrence: occurrence.toISOString(), outcome: 'started', runId: activeRunId },
    ],
    totals: { started: 2, skipped: 1, missed: 1 },
  };
  await new FencedDocuments<JobState>(docs).create(jobStateKey(job), epoch, state);

  return { hub, leader, epoch, job, activeRunId, finishedRunId, docs };
}

/**
 * Text written bit by bit (a process's stdout, an io's `out`), and waits for a condition on it:
 * tests wait on what was printed, never on the clock.
 */
export class OutputLog {
  private value = '';
  private ended: string | undefined;
  private readonly waiters = new Set<{ test: (text: string) => boolean; settle: (failure?: string) => void }>();

  get text(): string {
    return this.value;
  }

  write(chunk: string): void {
    this.value += chunk;
    for (const waiter of [...this.waiters]) if (waiter.test(this.value)) waiter.settle();
  }

  /** No more text will come (the writer exited): waits not yet met fail now rather than time out. */
  end(why: string): void {
    this.ended = why;
    for (const waiter of [...this.waiters]) waiter.settle(why);
  }

  /**
   * Resolves once the text passes `test`; rejects, quoting the text, after `timeoutMs` or at `end`.
   * `timeoutMs` is used as given: callers scale it with `patience`.
   */
  until(test: (text: string) => boolean, timeoutMs: number, what: string): Promise<void> {
    if (test(this.value)) return Promise.resolve();
    const failure = (why: string) => new Error(`${why} before the output had ${what}; it was:\n${this.value}`);
    if (this.ended !== undefined) return Promise.reject(failure(this.ended));
    return new Promise<void>((resolveWait, rejectWait) => {
      const waiter = {
        test,
        settle: (why?: string) => {
          clearTimeout(timer);
          this.waiters.delete(waiter);
          if (why === undefined) resolveWait();
          else rejectWait(failure(why));
        },
      };
      const timer = setTimeout(() => waiter.settle(`${timeoutMs} ms passed`), timeoutMs);
      this.waiters.add(waiter);
    });
  }
}

export interface SpawnedCli {
  readonly pid: number;
  readonly out: OutputLog;
  readonly err: OutputLog;
  /** Resolves with how it exited; kills its process group and rejects after `timeoutMs`, used as given (callers scale it). */
  exited(timeoutMs: number): Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  /** SIGKILL to its process group, for cleanup; harmless once it has exited. */
  kill(): void;
}

/**
 * The real `baton` process, as a user's `npx baton` runs it: the compiled CLI in dist/ (`npm
 * test` builds it first; compiling the sources again in every spawned process cost seconds each
 * on a busy machine). It gets only PATH in its environment, stdout and stderr piped (so not a
 * terminal), and its own process group, so a test's signal reaches it alone and `kill` leaves
 * nothing behind.
 */
export function spawnCli(argv: string[]): SpawnedCli {
  requireCurrentDist();
  const child = spawn(process.execPath, [cliPath, ...argv], {
    // The tests pass --connection and --hub, so no local.settings.json is read.
    cwd: projectRoot,
    env: { PATH: process.env.PATH ?? '' },
    detached: true,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const pid = child.pid;
  if (pid === undefined) throw new Error('baton did not start');
  const out = new OutputLog();
  const err = new OutputLog();
  child.stdout.setEncoding('utf8').on('data', (d: string) => out.write(d));
  child.stderr.setEncoding('utf8').on('data', (d: string) => err.write(d));
  let running = true;
  const closed = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolveClosed) =>
    child.once('close', (code, signal) => {
      running = false;
      const why = `baton exited (${signal ?? code})`;
      out.end(why);
      err.end(why);
      resolveClosed({ code, signal });
    }),
  );
  const kill = () => {
    if (!running) return;
    try {
      process.kill(-pid, 'SIGKILL');
    } catch {
      // gone already
    }
  };
  return {
    pid,
    out,
    err,
    kill,
    exited: async (timeoutMs) => {
      let timer: NodeJS.Timeout | undefined;
      const late = new Promise<undefined>((resolveLate) => (timer = setTimeout(() => resolveLate(undefined), timeoutMs)));
      const result = await Promise.race([closed, late]);
      clearTimeout(timer);
      if (result) return result;
      kill();
      await closed;
      throw new Error(
        `baton ${redactSecrets(argv.join(' '))} did not exit within ${timeoutMs} ms; stdout:\n${out.text}\nstderr:\n${err.text}`,
      );
    },
  };
}
