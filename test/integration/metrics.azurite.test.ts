import { describe, expect, it, onTestFinished } from 'vitest';
import { spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer } from 'node:https';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { setTimeout as delay } from 'node:timers/promises';
import { gunzipSync } from 'node:zlib';
import { InMemoryLogRecordExporter, LoggerProvider, SimpleLogRecordProcessor } from '@opentelemetry/sdk-logs';
import { MeterProvider, MetricReader, type DataPoint, type Histogram, type MetricData } from '@opentelemetry/sdk-metrics';
import { createBatonRuntime, type BatonRuntime } from '../../src/app/runtime';
import { handleWorkMessage } from '../../src/engine/worker';
import { LeaseLostError, StaleEpochError } from '../../src/errors';
import { FencedDocuments } from '../../src/fencing/fenced-documents';
import { requestRun } from '../../src/hub/requests';
import { isTerminal, runKeys, runRecordSchema, type RunRecord } from '../../src/hub/run-record';
import type { JobDefinition } from '../../src/jobs/job-definition';
import type { Leadership } from '../../src/lease/term';
import type { LeaderEvent } from '../../src/lease/leader-events';
import { pumpQueue } from '../../src/local/queue-pump';
import { CUSTOM_EVENT_NAME_ATTRIBUTE, EVENT_NAMES, METRIC_NAMES } from '../../src/telemetry/baton-telemetry';
import { useAzurite } from '../support/azurite';
import { sumJob } from '../support/sample-jobs';
import { describePatience, patience } from '../support/slowdown';

const fixture = useAzurite();

/** Collects when asked, as an exporter's periodic reader would on its interval. */
class OnDemandReader extends MetricReader {
  protected override onForceFlush(): Promise<void> {
    return Promise.resolve();
  }
  protected override onShutdown(): Promise<void> {
    return Promise.resolve();
  }
}

/** One instance's in-memory metric reader and event exporter, and the reads the test makes of them. */
function observed() {
  const reader = new OnDemandReader();
  const events = new InMemoryLogRecordExporter();
  const providers = {
    meterProvider: new MeterProvider({ readers: [reader] }),
    loggerProvider: new LoggerProvider({ processors: [new SimpleLogRecordProcessor({ exporter: events })] }),
  };
  const metric = async (name: string): Promise<MetricData | undefined> => {
    const { resourceMetrics } = await reader.collect();
    return resourceMetrics.scopeMetrics.flatMap((s) => s.metrics).find((m) => m.descriptor.name === name);
  };
  const points = async (name: string): Promise<Array<DataPoint<unknown>>> =>
    ((await metric(name))?.dataPoints as Array<DataPoint<unknown>> | undefined) ?? [];
  /** The value of the point of `name` with exactly these attributes; 0 when there is none. */
  const value = async (name: string, attributes: Record<string, string> = {}): Promise<number> => {
    const point = (await points(name)).find((p) => sameAttributes(p.attributes, attributes));
    return point === undefined ? 0 : (point.value as number);
  };
  const byAttribute = async (name: string, key: string): Promise<Record<string, number>> =>
    Object.fromEntries((await points(name)).map((p) => [String(p.attributes[key]), p.value as number]));
  const emitted = (name: string) =>
    events
      .getFinishedLogRecords()
      .filter((r) => r.attributes[CUSTOM_EVENT_NAME_ATTRIBUTE] === name)
      .map((r) => {
        const { [CUSTOM_EVENT_NAME_ATTRIBUTE]: _, ...properties } = r.attributes;
        return { properties, spanContext: r.spanContext };
      });
  return { providers, metric, points, value, byAttribute, emitted };
}

function sameAttributes(a: Record<string, unknown>, b: Record<string, string>): boolean {
  return Object.keys(a).length === Object.keys(b).length && Object.entries(b).every(([k, v]) => a[k] === v);
}

/** Polls `condition` (a hang guard, not a speed check: the machine may be busy; `timeoutMs` is scaled by `patience`). */
async function until(
  what: string,
  condition: () => Promise<boolean> | boolean,
  options: { timeoutMs?: number; context?: () => string } = {},
): Promise<void> {
  const timeoutMs = options.timeoutMs ?? 150_000;
  const capMs = patience(timeoutMs);
  const started = Date.now();
  while (!(await condition())) {
    if (Date.now() - started > capMs) {
      throw new Error(
        `still waiting for ${what} after ${describePatience(timeoutMs)}${options.context ? `: ${options.context()}` : ''}`,
      );
    }
    await delay(50);
  }
}

/** The instance's queue trigger, as the Functions host would run it, on shard 0. */
function startWorker(runtime: BatonRuntime): () => Promise<void> {
  const controller = new AbortController();
  const shard = runtime.coordinator.ctx.queues.active[0]!;
  const deps = runtime.workers[0]!;
  const pumping = pumpQueue(
    shard.work,
    shard.poison,
    async (message) => {
      const outcome = await handleWorkMessage(message.text, { dequeueCount: message.dequeueCount }, deps);
      if (outcome.kind === 'retry') throw new Error(outcome.firstError);
    },
    controller.signal,
    { retryDelaySeconds: 0, maxDequeueCount: runtime.settings.maxAttempts, maxPollingIntervalMs: 50 },
  );
  return async () => {
    controller.abort();
    await pumping;
  };
}

/** A term that a paused leader still believes in: a newer leader has written since, and it can no longer raise its epoch. */
function staleTerm(identity: string, epoch: number): Leadership {
  return {
    identity,
    epoch,
    signal: new AbortController().signal,
    yieldSignal: new AbortController().signal,
    heartbeat: () => undefined,
    remainingMs: () => 10_000,
    raiseEpoch: () => Promise.reject(new LeaseLostError('conflict', 'the lease is another holder’s now')),
    restUntil: () => undefined,
  };
}

/**
 * An instance's coordinator timer, as the host fires it: one attempt to lead after another, each
 * term as long as the lease holds. A term a busy machine loses, or an acquire that fails, is
 * followed by the next attempt as in production, so the test states its expectations over
 * however many terms there were.
 */
function candidate(runtime: BatonRuntime) {
  let paused = false;
  let stopped = false;
  let term: AbortController | undefined;
  const epochs: number[] = [];
  const errors: string[] = [];
  const loop = (async () => {
    while (!stopped) {
      if (!paused) {
        term = new AbortController();
        try {
          await runtime.elector.runIfLeader(
            (leadership) => {
              epochs.push(leadership.epoch);
              return runtime.coordinator.lead(leadership, { termMs: 600_000 });
            },
            { signal: term.signal },
          );
        } catch (err) {
          // A lost term, a failed acquire, or the stop: the next attempt, if any, follows.
          errors.push(err instanceof Error ? `${err.name}: ${err.message}` : String(err));
        }
      }
      if (!stopped) await delay(100);
    }
  })();
  return {
    /** Every epoch this candidate has led under, in order. */
    epochs,
    /** How its attempts and terms failed, for a test that times out to say. */
    describe: () => `terms at epochs [${epochs.join(', ')}], failures [${errors.join('; ')}]`,
    /** No new term after the current one, until `resume`. */
    pause: () => (paused = true),
    resume: () => (paused = false),
    /** Ends the current term, and the attempts. */
    async stop() {
      stopped = true;
      term?.abort();
      await loop;
    },
  };
}

const ITEMS = 40;
const cursed = (i: number) => i % 5 === 2;
const FAILING = Array.from({ length: ITEMS }, (_, i) => i).filter(cursed).length;

describe('metrics and events during a real run on Azurite', () => {
  it('count items, runs, terms, renewals, refusals and storage requests exactly', { timeout: patience(300_000) }, async () => {
    const env = {
      AzureWebJobsStorage: fixture.azurite.connectionString,
      BATON_HUB: fixture.uniqueName('metrics'),
      BATON_MAX_ATTEMPTS: '2',
    };
    const a = observed();
    const openWhileWorking: number[] = [];
    const base = sumJob({ items: ITEMS, failWhen: cursed });
    // An item in a worker's hands proves its run is dispatched and not yet ended, so open in the
    // book of whichever term leads: the open-run gauge is read there, rather than by racing the
    // run's end. (Read only while A leads: a starved term may be lost between two turns.)
    const job: JobDefinition = {
      ...base,
      process: async (item, ctx) => {
        if ((await a.value(METRIC_NAMES.isLeader)) === 1) openWhileWorking.push(await a.value(METRIC_NAMES.openRuns));
        return base.process(item as { i: number }, ctx);
      },
    };
    const aEvents: LeaderEvent[] = [];
    const runtimeA = createBatonRuntime(env, {
      identity: 'instance-a',
      jobs: [job],
      telemetry: a.providers,
      onLeaderEvent: (event) => aEvents.push(event),
    });
    const records = new FencedDocuments<RunRecord>(runtimeA.reads.docs, { parse: (v) => runRecordSchema.parse(v) });
    const record = async (runId: string) => (await records.read(runKeys.record(runId)))?.value;

    // --- a run with known counts, led by A ------------------------------------------------
    expect(await a.value(METRIC_NAMES.isLeader)).toBe(0);
    const stopWorker = startWorker(runtimeA);
    onTestFinished(() => stopWorker());
    const leaderA = candidate(runtimeA);
    // Should an expectation fail midway, no candidate keeps trying to lead after the test.
    onTestFinished(() => leaderA.stop());
    const firstRun = await requestRun(runtimeA.reads.docs, 'sum');
    await until('the first run to end', async () => isTerminal((await record(firstRun))?.state ?? 'planning'), {
      context: leaderA.describe,
    });
    await stopWorker();
    expect(await a.byAttribute(METRIC_NAMES.items, 'outcome')).toEqual({ succeeded: ITEMS - FAILING, failed: FAILING });
    expect(await a.points(METRIC_NAMES.items)).toEqual(
      expect.arrayContaining([expect.objectContaining({ attributes: { job: 'sum', outcome: 'failed' } })]),
    );
    const durations = await a.points(METRIC_NAMES.runDuration);
    expect(durations.map((p) => p.attributes)).toEqual([{ job: 'sum', state: 'failed' }]);
    const ended = await record(firstRun);
    const duration = durations[0]!.value as Histogram;
    expect(duration).toMatchObject({ count: 1, sum: Date.parse(ended!.endedAt!) - Date.parse(ended!.createdAt) });
    expect(openWhileWorking).toContain(1);
    expect(openWhileWorking.every((open) => open === 1)).toBe(true);
    expect(await a.value(METRIC_NAMES.openRuns)).toBe(0);
    expect(a.emitted(EVENT_NAMES.runEnded)).toEqual([
      {
        properties: {
          job: 'sum',
          runId: firstRun,
          state: 'failed',
          reason: `${ITEMS - FAILING} succeeded, ${FAILING} failed of ${ITEMS}`,
          durationMs: duration.sum,
          planned: ITEMS,
          succeeded: ITEMS - FAILING,
          failed: FAILING,
        },
        // Outside any trace, so no trace sampling can drop it.
        spanContext: undefined,
      },
    ]);

    // --- renewals: a term lasts past its first renewal (a third of the lease) --------------
    const renewed = async () =>
      ((await a.points(METRIC_NAMES.leaseRenewDuration))[0]?.value as Histogram | undefined)?.count ?? 0;
    await until('a renewal', async () => (await renewed()) > 0, { context: leaderA.describe });
    const renewals = (await a.metric(METRIC_NAMES.leaseRenewDuration))!;
    expect(renewals.descriptor.unit).toBe('ms');
    expect((renewals.dataPoints[0]!.value as Histogram).count).toBe(aEvents.filter((e) => e.type === 'renewed').length);

    // --- a forced change of leader: A's lease broken from outside, then B takes it ----------
    const lease = fixture.blobService.getContainerClient(runtimeA.settings.leaseContainer).getBlobClient(env.BATON_HUB);
    let brokenEpoch: number | undefined;
    // While A holds a term: no term after it, and the lease broken under it. (Should A lose the
    // term some other way first, as a starved machine can, it leads again and this repeats.)
    await until(
      'A to lose its lease to the break',
      async () => {
        if (aEvents.some((e) => e.type === 'lost' && e.reason === 'broken')) return true;
        if ((await a.value(METRIC_NAMES.isLeader)) === 0) {
          leaderA.resume();
          return false;
        }
        leaderA.pause();
        const epoch = leaderA.epochs.at(-1);
        if (brokenEpoch !== epoch) {
          brokenEpoch = epoch;
          await lease
            .getBlobLeaseClient()
            .breakLease(0)
            .catch(() => undefined);
        }
        return false;
      },
      { context: leaderA.describe },
    );
    await leaderA.stop();
    const epochA = leaderA.epochs.at(-1)!;
    expect(await a.value(METRIC_NAMES.isLeader)).toBe(0);
    const transitionsA = await a.byAttribute(METRIC_NAMES.leaderTransitions, 'reason');
    const termsA = aEvents.filter((e) => e.type === 'acquired').length;
    expect(transitionsA).toMatchObject({ acquired: termsA, 'lost-broken': 1 });
    // Every term ended exactly once, whatever ended it.
    expect(Object.values(transitionsA).reduce((sum, n) => sum + n, 0)).toBe(2 * termsA);
    const changesA = a.emitted(EVENT_NAMES.leadershipChanged).map((e) => e.properties);
    expect(changesA).toHaveLength(2 * termsA);
    expect(changesA.slice(-2)).toEqual([
      { identity: 'instance-a', epoch: epochA, reason: 'acquired' },
      { identity: 'instance-a', epoch: epochA, reason: 'lost-broken' },
    ]);

    const b = observed();
    const bEvents: LeaderEvent[] = [];
    const runtimeB = createBatonRuntime(env, {
      identity: 'instance-b',
      jobs: [job],
      telemetry: b.providers,
      onLeaderEvent: (event) => bEvents.push(event),
    });
    // B leads a second run with no worker running, so it stays open, written under B's epoch.
    const secondRun = await requestRun(runtimeB.reads.docs, 'sum');
    const leaderB = candidate(runtimeB);
    onTestFinished(() => leaderB.stop());
    await until(
      'B to dispatch the second run',
      async () => {
        const found = await records.read(runKeys.record(secondRun));
        return found?.value.state === 'running' && leaderB.epochs.includes(found.epoch);
      },
      { context: leaderB.describe },
    );
    await until(
      'B to show its lead and the open run',
      async () => (await b.value(METRIC_NAMES.isLeader)) === 1 && (await b.value(METRIC_NAMES.openRuns)) === 1,
      { context: leaderB.describe },
    );
    await leaderB.stop();
    const epochB = leaderB.epochs.at(-1)!;
    expect(epochB).toBeGreaterThan(epochA);
    const transitionsB = await b.byAttribute(METRIC_NAMES.leaderTransitions, 'reason');
    const termsB = bEvents.filter((e) => e.type === 'acquired').length;
    expect(transitionsB).toMatchObject({ acquired: termsB, released: expect.any(Number) as number });
    expect(Object.values(transitionsB).reduce((sum, n) => sum + n, 0)).toBe(2 * termsB);
    expect(await b.value(METRIC_NAMES.isLeader)).toBe(0);
    expect(await b.value(METRIC_NAMES.openRuns)).toBe(0);
    expect(
      b
        .emitted(EVENT_NAMES.leadershipChanged)
        .map((e) => e.properties)
        .slice(-2),
    ).toEqual([
      { identity: 'instance-b', epoch: epochB, reason: 'acquired' },
      { identity: 'instance-b', epoch: epochB, reason: 'released' },
    ]);

    // --- A resumes its old term, as a paused leader would: its first write is refused -------
    const before = (await record(secondRun))!;
    await expect(runtimeA.coordinator.lead(staleTerm('instance-a', epochA), { termMs: 60_000 })).rejects.toBeInstanceOf(
      StaleEpochError,
    );
    expect(await a.value(METRIC_NAMES.fencingRefusals)).toBe(1);
    expect(await b.value(METRIC_NAMES.fencingRefusals)).toBe(0);
    expect(await record(secondRun)).toEqual(before);

    // --- storage requests, by operation, as the runtime's own counter has them --------------
    const requests = await a.byAttribute(METRIC_NAMES.storageRequests, 'operation');
    expect(requests).toEqual(runtimeA.storageRequests.snapshot());
    for (const operation of [
      'blob.lease.acquire',
      'blob.lease.renew',
      'blob.put',
      'queue.messages.send',
      'queue.messages.receive',
    ]) {
      expect(requests[operation], operation).toBeGreaterThan(0);
    }
    // Each instance counts its own clients only.
    expect(await b.byAttribute(METRIC_NAMES.storageRequests, 'operation')).toEqual(runtimeB.storageRequests.snapshot());
    await runtimeA.shutdown();
    await runtimeB.shutdown();
  });
});

/** A self-signed certificate for 127.0.0.1, made with the system's openssl; undefined without one. */
function selfSignedCertificate(): { key: Buffer; cert: Buffer; dispose(): void } | undefined {
  const dir = mkdtempSync(join(tmpdir(), 'baton-ai-'));
  const made = spawnSync(
    'openssl',
    [
      'req',
      '-x509',
      '-newkey',
      'rsa:2048',
      '-nodes',
      '-keyout',
      'key.pem',
      '-out',
      'cert.pem',
      '-days',
      '1',
      '-subj',
      '/CN=127.0.0.1',
    ],
    { cwd: dir, encoding: 'utf8', timeout: patience(60_000) },
  );
  if (made.status !== 0) {
    rmSync(dir, { recursive: true, force: true });
    return undefined;
  }
  return {
    key: readFileSync(join(dir, 'key.pem')),
    cert: readFileSync(join(dir, 'cert.pem')),
    dispose: () => rmSync(dir, { recursive: true, force: true }),
  };
}

interface Envelope {
  name: string;
  data: { baseType: string; baseData: { name?: string; properties?: Record<string, string>; metrics?: Array<{ name: string }> } };
}

const hasOpenssl = spawnSync('openssl', ['version'], { encoding: 'utf8' }).status === 0;

describe('Application Insights', () => {
  // The exporter only speaks HTTPS, so the stand-in ingestion endpoint needs a certificate.
  it.skipIf(!hasOpenssl)(
    'gets the two events as customEvents and the metrics as customMetrics, and no log line shows the connection string (needs openssl)',
    async () => {
      const certificate = selfSignedCertificate();
      if (!certificate) throw new Error('openssl could not make a self-signed certificate');
      const received: Envelope[] = [];
      const server = createServer({ key: certificate.key, cert: certificate.cert }, (req, res) => {
        const chunks: Buffer[] = [];
        req.on('data', (chunk: Buffer) => chunks.push(chunk));
        req.on('end', () => {
          if (req.url?.startsWith('/v2.1/track')) {
            const body = Buffer.concat(chunks);
            const text = (req.headers['content-encoding'] === 'gzip' ? gunzipSync(body) : body).toString('utf8');
            received.push(...(JSON.parse(text) as Envelope[]));
          }
          res.writeHead(200, { 'content-type': 'application/json' });
          res.end(JSON.stringify({ itemsReceived: 1, itemsAccepted: 1, errors: [] }));
        });
      });
      await new Promise<void>((listening) => server.listen(0, '127.0.0.1', listening));
      const endpoint = `https://127.0.0.1:${(server.address() as AddressInfo).port}/`;
      const ikey = '0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d';
      const connectionString = `InstrumentationKey=${ikey};IngestionEndpoint=${endpoint};LiveEndpoint=${endpoint}`;
      // As the Functions entry does it: setup first, then the runtime's telemetry on the providers
      // it set up (the global ones, as Baton's copy of the API sees them, can be another copy's).
      const src = resolve(__dirname, '../../src');
      const script = `
        const { setupTelemetry } = require(${JSON.stringify(join(src, 'app/telemetry-setup.ts'))});
        const { BatonTelemetry } = require(${JSON.stringify(join(src, 'telemetry/baton-telemetry.ts'))});
        const { newRunRecord, transition } = require(${JSON.stringify(join(src, 'hub/run-record.ts'))});
        const setup = setupTelemetry(process.env, { log: (line) => console.log(line) });
        const telemetry = new BatonTelemetry(setup.providers);
        telemetry.leaderEvent({ type: 'acquired', identity: 'instance-a', epoch: 3, leaseId: 'l' });
        telemetry.itemsFolded('nightly', 9, 1);
        const created = new Date('2026-03-01T02:00:00.000Z');
        const run = newRunRecord({ runId: 'nightly/r1', job: 'nightly', trigger: 'manual', now: created, timeoutSeconds: 600 });
        telemetry.runEnded(transition(run, 'cancelled', new Date(created.getTime() + 5000), 'cancelled by an operator'));
        setup.shutdown({ signal: AbortSignal.timeout(${patience(60000)}) }).then(() => process.exit(0));
      `;
      const child = spawn(process.execPath, ['--import', 'tsx', '-e', script], {
        env: {
          ...process.env,
          APPLICATIONINSIGHTS_CONNECTION_STRING: connectionString,
          BATON_METRICS_EXPORTER: 'none',
          // Only for this child and its stand-in endpoint's self-signed certificate.
          NODE_TLS_REJECT_UNAUTHORIZED: '0',
          APPLICATIONINSIGHTS_STATSBEAT_DISABLED: 'true',
          APPLICATIONINSIGHTS_SDKSTATS_DISABLED: 'true',
        },
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      let output = '';
      child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
      child.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()));
      let exitCode: number | null;
      try {
        exitCode = await new Promise<number | null>((exited) => child.on('close', exited));
      } finally {
        server.close();
        certificate.dispose();
      }
      expect(exitCode, output).toBe(0);
      expect(output).toContain('metrics and events go to azure-monitor');
      expect(output).not.toContain(ikey);
      expect(output).not.toContain('InstrumentationKey');

      const events = received.filter((e) => e.data.baseType === 'EventData').map((e) => e.data.baseData);
      // Custom event properties travel as strings.
      expect(events).toEqual(
        expect.arrayContaining([
          expect.objectContaining({
            name: 'baton.leadership.changed',
            properties: { identity: 'instance-a', epoch: '3', reason: 'acquired' },
          }),
          expect.objectContaining({
            name: 'baton.run.ended',
            properties: expect.objectContaining({
              job: 'nightly',
              runId: 'nightly/r1',
              state: 'cancelled',
              reason: 'cancelled by an operator',
              durationMs: '5000',
            }) as unknown,
          }),
        ]),
      );
      const metricNames = received.filter((e) => e.data.baseType === 'MetricData').flatMap((e) => e.data.baseData.metrics ?? []);
      expect(metricNames.map((m) => m.name)).toEqual(
        expect.arrayContaining([
          'baton.items',
          'baton.leader.transitions',
          'baton.leader.is_leader',
          'baton.run.duration',
          'baton.run.open',
        ]),
      );
    },
  );
});
