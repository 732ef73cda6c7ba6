import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { InvocationContext, type Timer } from '@azure/functions';
import { z } from 'zod';
import { batonRegistrations } from '../../src/app/registrations';
import { type TimerRegistration } from '../../src/app/registration-types';
import { FaultProxy, type Exchange } from '../../chaos/fault-proxy';
import { createBatonRuntime } from '../../src/app/runtime';
import { jobStateKey, jobStateSchema, type JobState } from '../../src/hub/job-state';
import { requestRun } from '../../src/hub/requests';
import { defineJob } from '../../src/jobs/define-job';
import type { JobDefinition } from '../../src/jobs/job-definition';
import { runKeys, runRecordSchema, type RunRecord } from '../../src/hub/run-record';
import { useAzurite } from '../support/azurite';
import { skewedClock } from '../support/skewed-clock';
import { describePatience, patience } from '../support/slowdown';

/**
 * Two instances of the app, one whose wall clock is 120 s fast and one 120 s slow, lead in turn
 * on one Azurite. The witness for "by storage time" is what storage stamped on each write of a
 * run record: the Last-Modified of its answer, taken off the wire by a proxy that passes every
 * blob request through untouched (Azurite resets a blob's creation time on every overwrite, so
 * the blob's own properties cannot say when a run was created). Stamps drop the milliseconds;
 * occurrences are whole seconds, so `created >= occurrence` is exact.
 */
const fixture = useAzurite();
let proxy: FaultProxy;
/** Every answered Put Blob of a run record, in storage's answer order. */
const recordWrites: RecordWrite[] = [];

interface RecordWrite {
  container: string;
  runId: string;
  status: number;
  create: boolean;
  state: string | undefined;
  /** Storage's Last-Modified for the write, ms. */
  stampedAt: number;
}

function recordWriteOf(exchange: Exchange): RecordWrite | undefined {
  const url = new URL(exchange.url, 'http://proxy');
  // Path-style: /<account>/<container>/runs/<run id>/run.json; Put Blob has no `comp=`.
  const match = /^\/[^/]+\/([^/]+)\/runs\/(.+)\/run\.json$/.exec(decodeURIComponent(url.pathname));
  if (exchange.method !== 'PUT' || url.searchParams.has('comp') || !match) return undefined;
  const lastModified = exchange.responseHeaders['last-modified'];
  let state: string | undefined;
  try {
    state = (JSON.parse(exchange.body?.toString('utf8') ?? '') as { value?: { state?: string } }).value?.state;
  } catch {
    state = undefined;
  }
  return {
    container: match[1]!,
    runId: match[2]!,
    status: exchange.status,
    create: exchange.requestHeaders['if-none-match'] === '*',
    state,
    stampedAt: lastModified ? Date.parse(lastModified) : Number.NaN,
  };
}

beforeAll(async () => {
  proxy = await FaultProxy.start({
    upstreamHost: '127.0.0.1',
    upstreamPort: fixture.azurite.blobPort,
    seed: 13,
    captureBody: (method, url) => method === 'PUT' && url.split('?')[0]!.endsWith('/run.json'),
    onExchange: (exchange) => {
      const write = recordWriteOf(exchange);
      if (write && write.status < 300) recordWrites.push(write);
    },
  });
});
afterAll(async () => {
  await proxy?.close();
});

function writesOf(hub: string, runId: string): RecordWrite[] {
  return recordWrites.filter((w) => w.container === `${hub}-runs` && w.runId === runId);
}

/** When storage created the run's record, to the second. */
function createdAt(hub: string, runId: string): number {
  const creates = writesOf(hub, runId).filter((w) => w.create);
  expect(creates, `creations of ${runId}`).toHaveLength(1);
  return creates[0]!.stampedAt;
}

const SKEW = { fast: 120_000, slow: -120_000 } as const;
type Skew = keyof typeof SKEW;
/** How long any one phase may take on a busy machine (scaled by `patience`); a hang guard, not a speed check. */
const PHASE_LIMIT_MS = 90_000;

const timer: Timer = {
  isPastDue: false,
  schedule: { adjustForDST: false },
  scheduleStatus: { last: '', next: '', lastUpdated: '' },
};

function everyTwoSeconds(): JobDefinition {
  return defineJob({
    name: 'every2',
    schedule: '*/2 * * * * *',
    overlap: 'allow',
    // Every occurrence runs, so a handover that lost or repeated one would show.
    catchUp: 'all',
    itemSchema: z.object({}),
    split: () => [],
    process: () => ({}),
    aggregate: { initial: () => 0, add: (acc: number) => acc + 1 },
  });
}

/** A run that stays open (no worker takes its item) until it times out. */
function stuck(timeoutSeconds: number): JobDefinition {
  return defineJob({
    name: 'stuck',
    schedule: '0 0 0 1 1 *',
    timeoutSeconds,
    itemSchema: z.object({ i: z.number() }),
    split: () => [{ i: 0 }],
    process: () => ({}),
    aggregate: { initial: () => 0, add: (acc: number) => acc + 1 },
  });
}

function instance(hub: string, skew: Skew, jobs: JobDefinition[], lines: string[] = []) {
  const connectionString = fixture.azurite.connectionString.replace(
    /BlobEndpoint=http:\/\/[^/;]+/,
    `BlobEndpoint=http://127.0.0.1:${proxy.port}`,
  );
  const runtime = createBatonRuntime(
    { AzureWebJobsStorage: connectionString, BATON_HUB: hub, BATON_TERM_SECONDS: '5' },
    {
      jobs,
      identity: skew,
      clock: skewedClock(SKEW[skew]),
      logger: { info: (line) => lines.push(line), warn: (line) => lines.push(line) },
    },
  );
  const coordinator = batonRegistrations(runtime)[0] as TimerRegistration;
  let ticks = 0;
  return {
    skew,
    runtime,
    /** Ticks, as the host's timer does, until `done` holds. */
    async leadUntil(what: string, done: () => Promise<boolean>): Promise<void> {
      const started = Date.now();
      const capMs = patience(PHASE_LIMIT_MS);
      while (!(await done())) {
        if (Date.now() - started > capMs)
          throw new Error(`the ${skew} leader: ${what} not within ${describePatience(PHASE_LIMIT_MS)}`);
        const context = new InvocationContext({
          functionName: coordinator.name,
          invocationId: `${skew}-${ticks++}`,
          logHandler: () => undefined,
        });
        const outcome = await coordinator.handler(timer, context);
        // The other instance still holds the lease: tick again soon, as the next timer would.
        if (outcome && typeof outcome === 'object' && 'led' in outcome && outcome.led === false) {
          await new Promise((resolve) => setTimeout(resolve, 100));
        }
      }
    },
  };
}

function runsContainer(hub: string) {
  return fixture.blobService.getContainerClient(`${hub}-runs`);
}

async function readRecord(hub: string, runId: string): Promise<RunRecord | undefined> {
  const blob = runsContainer(hub).getBlobClient(runKeys.record(runId));
  if (!(await blob.exists())) return undefined;
  return runRecordSchema.parse((JSON.parse((await blob.downloadToBuffer()).toString('utf8')) as { value: unknown }).value);
}

async function scheduledRuns(hub: string, job: string): Promise<RunRecord[]> {
  const runs: RunRecord[] = [];
  if (!(await runsContainer(hub).exists())) return runs;
  for await (const blob of runsContainer(hub).listBlobsFlat({ prefix: `runs/${job}/` })) {
    if (!blob.name.endsWith('/run.json')) continue;
    const record = await readRecord(hub, blob.name.slice('runs/'.length, -'/run.json'.length));
    if (record) runs.push(record);
  }
  return runs.sort((a, b) => a.runId.localeCompare(b.runId));
}

async function jobState(hub: string, job: string): Promise<JobState | undefined> {
  const blob = runsContainer(hub).getBlobClient(jobStateKey(job));
  if (!(await blob.exists())) return undefined;
  return jobStateSchema.parse((JSON.parse((await blob.downloadToBuffer()).toString('utf8')) as { value: unknown }).value);
}

const seconds = (ms: number): string => `${(ms / 1000).toFixed(0)} s`;

/** Runs whose record storage created before their occurrence, described. */
async function earlyRuns(hub: string): Promise<string[]> {
  return (await scheduledRuns(hub, 'every2'))
    .map((run) => ({ runId: run.runId, occurrence: Date.parse(run.occurrence!), created: createdAt(hub, run.runId) }))
    .filter((t) => t.created < t.occurrence)
    .map((t) => `${t.runId} created ${seconds(t.occurrence - t.created)} before its occurrence by storage time`);
}

describe('clock skew: schedules and deadlines follow storage time', () => {
  it('learns storage time from its first answer, a refusal included, and says how far off it is', async () => {
    const lines: string[] = [];
    const fast = instance(fixture.uniqueName('sync'), 'fast', [], lines);
    const clock = fast.runtime.clock;
    expect(clock.synced).toBe(false);
    // The hub's container does not exist yet: a 404.
    expect(await fast.runtime.coordinator.ctx.docs.read('nothing-here.json')).toBeUndefined();
    expect(clock.synced).toBe(true);
    // Azurite's clock is this machine's; Date.now() drops the fraction of a millisecond.
    const estimate = clock.date().getTime();
    const storageNow = Date.now() + 1;
    expect(estimate).toBeLessThanOrEqual(storageNow);
    expect(storageNow - estimate).toBeLessThan(5_000);
    expect(lines).toContainEqual(expect.stringMatching(/^this machine's clock is 12\d\.\d s ahead of storage time/));

    // The queue client feeds it too: a receive from a queue that does not exist yet.
    const slow = instance(fixture.uniqueName('sync'), 'slow', []);
    await expect(slow.runtime.coordinator.ctx.queues.workFor(0).receive(1, 1)).rejects.toMatchObject({ statusCode: 404 });
    expect(slow.runtime.clock.synced).toBe(true);
    const slowEstimate = slow.runtime.clock.date().getTime();
    const slowStorageNow = Date.now() + 1;
    expect(slowEstimate).toBeLessThanOrEqual(slowStorageNow);
    expect(slowStorageNow - slowEstimate).toBeLessThan(5_000);
  });

  // Each case has hubs of its own and waits on real time, so the cases run side by side.
  it.concurrent.each<[Skew, Skew]>([
    ['fast', 'slow'],
    ['slow', 'fast'],
  ])(
    'a %s leader hands over to a %s leader: no occurrence starts early, none twice, none lost',
    async (first, second) => {
      const hub = fixture.uniqueName('handover');
      const a = instance(hub, first, [everyTwoSeconds()]);
      const b = instance(hub, second, [everyTwoSeconds()]);
      await a.leadUntil('two runs started', async () => (await scheduledRuns(hub, 'every2')).length >= 2);
      expect(await earlyRuns(hub), `the ${first} leader`).toEqual([]);
      const handedOver = (await scheduledRuns(hub, 'every2')).length;
      await b.leadUntil('two more runs started', async () => (await scheduledRuns(hub, 'every2')).length >= handedOver + 2);
      expect(await earlyRuns(hub), `the ${second} leader`).toEqual([]);

      const runs = await scheduledRuns(hub, 'every2');
      const timing = runs.map((run) => ({
        runId: run.runId,
        occurrence: Date.parse(run.occurrence!),
        createdOn: createdAt(hub, run.runId),
      }));
      // Not late by the skew either: the slow leader keeps the schedule. Loose: a busy machine lags.
      const late = timing
        .filter((t) => t.createdOn - t.occurrence > 60_000)
        .map((t) => `${t.runId} created ${seconds(t.createdOn - t.occurrence)} after its occurrence`);
      expect(late).toEqual([]);

      // One run per occurrence, every occurrence of the 2 s grid from the first to the last.
      const occurrences = timing.map((t) => t.occurrence);
      expect(new Set(occurrences).size).toBe(occurrences.length);
      const span = (occurrences.at(-1)! - occurrences[0]!) / 2000 + 1;
      expect(occurrences).toEqual(Array.from({ length: span }, (_, i) => occurrences[0]! + i * 2000));
      const state = await jobState(hub, 'every2');
      expect(state?.totals).toEqual({ started: runs.length, skipped: 0, missed: 0 });
      const started = state!.recent.filter((e) => e.outcome === 'started').map((e) => e.runId);
      expect(new Set(started).size).toBe(started.length);
    },
    patience(4 * PHASE_LIMIT_MS),
  );

  // Each case has hubs of its own and waits on real time, so the cases run side by side.
  it.concurrent.each<[Skew, Skew]>([
    ['slow', 'fast'],
    ['fast', 'slow'],
  ])(
    'a run created by a %s leader is timed out by a %s leader no earlier than its deadline by storage time',
    async (creator, checker) => {
      const timeoutSeconds = 20;
      const hub = fixture.uniqueName('deadline');
      const a = instance(hub, creator, [stuck(timeoutSeconds)]);
      const b = instance(hub, checker, [stuck(timeoutSeconds)]);
      const runId = await requestRun(a.runtime.coordinator.ctx.docs, 'stuck');
      await a.leadUntil('the run created', async () => (await readRecord(hub, runId)) !== undefined);
      await b.leadUntil('the run timed out', async () => (await readRecord(hub, runId))?.state === 'timed-out');

      const record = (await readRecord(hub, runId))!;
      const deadlineByStorage = createdAt(hub, runId) + timeoutSeconds * 1000;
      // The first write that says timed-out is the timeout; any later one only adds to the record.
      const timedOut = writesOf(hub, runId).find((w) => w.state === 'timed-out');
      expect(timedOut).toBeDefined();
      const timedOutAt = timedOut!.stampedAt;
      // Storage stamped the timed-out write no earlier than the deadline. The stamps drop the
      // milliseconds and the clock reads up to 1 s plus a round trip late: 5 s covers both.
      expect(
        timedOutAt,
        `timed out ${seconds(deadlineByStorage - timedOutAt)} before its deadline by storage time`,
      ).toBeGreaterThanOrEqual(deadlineByStorage - 5_000);
      // The recorded deadline is in storage time, and the timeout came after it.
      const deadlineAt = Date.parse(record.deadlineAt);
      expect(deadlineAt - deadlineByStorage).toBeGreaterThanOrEqual(-5_000);
      expect(deadlineAt - deadlineByStorage).toBeLessThan(1_000);
      expect(timedOutAt).toBeGreaterThanOrEqual(Math.floor(deadlineAt / 1000) * 1000);
    },
    patience(3 * PHASE_LIMIT_MS),
  );
});
