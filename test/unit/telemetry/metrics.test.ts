import { afterEach, describe, expect, it } from 'vitest';
import { metrics } from '@opentelemetry/api';
import { logs } from '@opentelemetry/api-logs';
import { InMemoryLogRecordExporter, LoggerProvider, SimpleLogRecordProcessor } from '@opentelemetry/sdk-logs';
import { MeterProvider, MetricReader, type DataPoint, type Histogram, type MetricData } from '@opentelemetry/sdk-metrics';
import { createBatonRuntime } from '../../../src/app/runtime';
import { parseMetricExportIntervalMs, parseMetricsExporter } from '../../../src/app/settings';
import { aadCredential, setupTelemetry } from '../../../src/app/telemetry-setup';
import { InvalidSettingError, StaleEpochError } from '../../../src/errors';
import { FencedDocuments, refuseStale } from '../../../src/fencing/fenced-documents';
import { InMemoryDocumentStore } from '../../../src/fencing/in-memory-document-store';
import { newRunRecord, transition } from '../../../src/hub/run-record';
import { StorageRequestCounter } from '../../../src/storage/request-counter';
import { BatonTelemetry, CUSTOM_EVENT_NAME_ATTRIBUTE, EVENT_NAMES, METRIC_NAMES } from '../../../src/telemetry/baton-telemetry';

/** Collects when asked, as an exporter's periodic reader would on its interval. */
class OnDemandReader extends MetricReader {
  protected override onForceFlush(): Promise<void> {
    return Promise.resolve();
  }
  protected override onShutdown(): Promise<void> {
    return Promise.resolve();
  }
}

function harness(storageRequests?: StorageRequestCounter) {
  const reader = new OnDemandReader();
  const events = new InMemoryLogRecordExporter();
  const telemetry = new BatonTelemetry({
    meterProvider: new MeterProvider({ readers: [reader] }),
    loggerProvider: new LoggerProvider({ processors: [new SimpleLogRecordProcessor({ exporter: events })] }),
    ...(storageRequests ? { storageRequests } : {}),
  });
  const collect = async (): Promise<Map<string, MetricData>> => {
    const { resourceMetrics } = await reader.collect();
    return new Map(resourceMetrics.scopeMetrics.flatMap((s) => s.metrics).map((m) => [m.descriptor.name, m]));
  };
  /** The value of `name`'s point whose attributes include `attributes` (undefined: none). */
  const value = async (name: string, attributes: Record<string, string> = {}): Promise<number | undefined> => {
    const point = pointOf((await collect()).get(name), attributes);
    return point === undefined ? undefined : (point.value as number);
  };
  const emitted = () => events.getFinishedLogRecords().map((r) => ({ ...r.attributes }));
  return { telemetry, collect, value, emitted };
}

function pointOf(metric: MetricData | undefined, attributes: Record<string, string>): DataPoint<unknown> | undefined {
  return (metric?.dataPoints as DataPoint<unknown>[] | undefined)?.find((p) =>
    Object.entries(attributes).every(([k, v]) => p.attributes[k] === v),
  );
}

const term = { identity: 'instance-a', epoch: 7 };

describe('Baton telemetry', () => {
  it('counts each term once, begun and ended, and shows who leads', async () => {
    const { telemetry, value, emitted } = harness();
    expect(await value(METRIC_NAMES.isLeader)).toBe(0);
    telemetry.leaderEvent({ type: 'acquired', ...term, leaseId: 'l1' });
    expect(await value(METRIC_NAMES.isLeader)).toBe(1);
    telemetry.leaderEvent({ type: 'renewed', ...term, latencyMs: 12 });
    telemetry.leaderEvent({ type: 'renew-failed', ...term, error: new Error('x'), sinceLastRenewMs: 5000 });
    expect(await value(METRIC_NAMES.isLeader)).toBe(1);
    // A deadline loss is followed by a release that hands the lease back early: one transition.
    telemetry.leaderEvent({ type: 'lost', ...term, reason: 'deadline', sinceLastRenewMs: 10_000 });
    telemetry.leaderEvent({ type: 'released', ...term, ledMs: 30_000 });
    expect(await value(METRIC_NAMES.isLeader)).toBe(0);
    telemetry.leaderEvent({ type: 'acquired', ...term, epoch: 8, leaseId: 'l2' });
    telemetry.leaderEvent({ type: 'released', ...term, epoch: 8, ledMs: 1000 });
    telemetry.leaderEvent({ type: 'acquired', ...term, epoch: 9, leaseId: 'l3' });
    telemetry.leaderEvent({ type: 'release-failed', ...term, epoch: 9, error: new Error('timeout') });
    expect(await value(METRIC_NAMES.leaderTransitions, { reason: 'acquired' })).toBe(3);
    expect(await value(METRIC_NAMES.leaderTransitions, { reason: 'lost-deadline' })).toBe(1);
    expect(await value(METRIC_NAMES.leaderTransitions, { reason: 'released' })).toBe(1);
    expect(await value(METRIC_NAMES.leaderTransitions, { reason: 'release-failed' })).toBe(1);
    expect(await value(METRIC_NAMES.isLeader)).toBe(0);
    expect(emitted()).toEqual([
      { [CUSTOM_EVENT_NAME_ATTRIBUTE]: EVENT_NAMES.leadershipChanged, identity: 'instance-a', epoch: 7, reason: 'acquired' },
      { [CUSTOM_EVENT_NAME_ATTRIBUTE]: EVENT_NAMES.leadershipChanged, identity: 'instance-a', epoch: 7, reason: 'lost-deadline' },
      { [CUSTOM_EVENT_NAME_ATTRIBUTE]: EVENT_NAMES.leadershipChanged, identity: 'instance-a', epoch: 8, reason: 'acquired' },
      { [CUSTOM_EVENT_NAME_ATTRIBUTE]: EVENT_NAMES.leadershipChanged, identity: 'instance-a', epoch: 8, reason: 'released' },
      { [CUSTOM_EVENT_NAME_ATTRIBUTE]: EVENT_NAMES.leadershipChanged, identity: 'instance-a', epoch: 9, reason: 'acquired' },
      {
        [CUSTOM_EVENT_NAME_ATTRIBUTE]: EVENT_NAMES.leadershipChanged,
        identity: 'instance-a',
        epoch: 9,
        reason: 'release-failed',
      },
    ]);
  });

  it('counts stops by path and lease: its own at shutdown, and a predecessor that never gave the lease back', async () => {
    const { telemetry, value, emitted } = harness();
    telemetry.instanceStopped({ instance: 'instance-a', path: 'hook', lease: 'handed-over', durationMs: 812.4 });
    telemetry.instanceStopped({ instance: 'instance-b', path: 'signal', lease: 'not-held', durationMs: 3 });
    // A successor that found the lease released, or its own, records nothing of anyone's stop.
    telemetry.leaderEvent({ type: 'acquired', ...term, leaseId: 'l1', after: { holder: 'instance-a', freedAs: 'released' } });
    telemetry.leaderEvent({ type: 'released', ...term, ledMs: 10 });
    // Its own lease, expired while it could not renew and taken again: a loss, not a stop.
    telemetry.leaderEvent({
      type: 'acquired',
      ...term,
      epoch: 8,
      leaseId: 'l2',
      after: { holder: 'instance-a', freedAs: 'expired' },
    });
    telemetry.leaderEvent({ type: 'released', ...term, epoch: 8, ledMs: 10 });
    // Another instance found it expired: nothing of a's stop reached storage.
    telemetry.leaderEvent({
      type: 'acquired',
      identity: 'instance-c',
      epoch: 9,
      leaseId: 'l3',
      after: { holder: 'instance-a', freedAs: 'expired' },
    });
    expect(await value(METRIC_NAMES.stops, { path: 'hook', lease: 'handed-over' })).toBe(1);
    expect(await value(METRIC_NAMES.stops, { path: 'signal', lease: 'not-held' })).toBe(1);
    expect(await value(METRIC_NAMES.stops, { path: 'none', lease: 'not-released' })).toBe(1);
    const stops = emitted().filter((e) => e[CUSTOM_EVENT_NAME_ATTRIBUTE] === EVENT_NAMES.instanceStopped);
    expect(stops).toEqual([
      {
        [CUSTOM_EVENT_NAME_ATTRIBUTE]: EVENT_NAMES.instanceStopped,
        instance: 'instance-a',
        path: 'hook',
        lease: 'handed-over',
        durationMs: 812,
      },
      {
        [CUSTOM_EVENT_NAME_ATTRIBUTE]: EVENT_NAMES.instanceStopped,
        instance: 'instance-b',
        path: 'signal',
        lease: 'not-held',
        durationMs: 3,
      },
      { [CUSTOM_EVENT_NAME_ATTRIBUTE]: EVENT_NAMES.instanceStopped, instance: 'instance-a', path: 'none', lease: 'not-released' },
    ]);
  });

  it('records renewals in ms, and emits events outside any trace', async () => {
    const reader = new OnDemandReader();
    const events = new InMemoryLogRecordExporter();
    const telemetry = new BatonTelemetry({
      meterProvider: new MeterProvider({ readers: [reader] }),
      loggerProvider: new LoggerProvider({ processors: [new SimpleLogRecordProcessor({ exporter: events })] }),
    });
    telemetry.leaderEvent({ type: 'acquired', ...term, leaseId: 'l1' });
    for (const latencyMs of [8, 30, 120]) telemetry.leaderEvent({ type: 'renewed', ...term, latencyMs });
    const { resourceMetrics } = await reader.collect();
    const renew = resourceMetrics.scopeMetrics[0]?.metrics.find((m) => m.descriptor.name === METRIC_NAMES.leaseRenewDuration);
    expect(renew?.descriptor.unit).toBe('ms');
    const histogram = renew?.dataPoints[0]?.value as Histogram;
    expect(histogram).toMatchObject({ count: 3, sum: 158, min: 8, max: 120 });
    // No span context: trace-based sampling has nothing to drop it by.
    expect(events.getFinishedLogRecords()[0]?.spanContext).toBeUndefined();
  });

  it("records a scheduled run's start lag and first-item lag by job; a manual run has neither", async () => {
    const { telemetry, collect } = harness();
    const scheduled = newRunRecord({
      runId: 'nightly/2026-03-01T02:00:00.000Z',
      job: 'nightly',
      trigger: 'schedule',
      occurrence: new Date('2026-03-01T02:00:00.000Z'),
      now: new Date('2026-03-01T02:00:00.180Z'),
      timeoutSeconds: 600,
    });
    telemetry.runStarted(scheduled);
    telemetry.firstItemCounted({ ...scheduled, firstItemAt: '2026-03-01T02:00:01.430Z' });
    const manual = newRunRecord({
      runId: 'nightly/manual-1',
      job: 'nightly',
      trigger: 'manual',
      occurrence: undefined,
      now: new Date('2026-03-01T03:00:00.000Z'),
      timeoutSeconds: 600,
    });
    telemetry.runStarted(manual);
    telemetry.firstItemCounted({ ...manual, firstItemAt: '2026-03-01T03:00:02.000Z' });
    const metrics = await collect();
    expect(metrics.get(METRIC_NAMES.startLag)?.descriptor.unit).toBe('ms');
    expect(pointOf(metrics.get(METRIC_NAMES.startLag), { job: 'nightly' })?.value).toMatchObject({ count: 1, sum: 180 });
    expect(pointOf(metrics.get(METRIC_NAMES.firstItemLag), { job: 'nightly' })?.value).toMatchObject({ count: 1, sum: 1430 });
  });

  it('counts occurrences by outcome, and sends each listed skip or miss as an event', async () => {
    const { telemetry, value, emitted } = harness();
    telemetry.occurrencesRecorded('nightly', {
      started: 1,
      skipped: 1,
      missed: 3,
      events: [
        { at: 't', occurrence: '2026-03-01T02:00:00.000Z', outcome: 'skipped', reason: 'overlap: skip; AccountKey=abc123' },
        { at: 't', occurrence: '2026-03-01T01:00:00.000Z', outcome: 'missed', reason: 'past its starting deadline' },
      ],
    });
    telemetry.occurrencesRecorded('nightly', { started: 2, skipped: 0, missed: 0, events: [] });
    expect(await value(METRIC_NAMES.occurrences, { job: 'nightly', outcome: 'started' })).toBe(3);
    expect(await value(METRIC_NAMES.occurrences, { job: 'nightly', outcome: 'skipped' })).toBe(1);
    expect(await value(METRIC_NAMES.occurrences, { job: 'nightly', outcome: 'missed' })).toBe(3);
    expect(emitted()).toEqual([
      {
        [CUSTOM_EVENT_NAME_ATTRIBUTE]: EVENT_NAMES.occurrenceNotRun,
        job: 'nightly',
        occurrence: '2026-03-01T02:00:00.000Z',
        outcome: 'skipped',
        reason: 'overlap: skip; AccountKey=***',
      },
      {
        [CUSTOM_EVENT_NAME_ATTRIBUTE]: EVENT_NAMES.occurrenceNotRun,
        job: 'nightly',
        occurrence: '2026-03-01T01:00:00.000Z',
        outcome: 'missed',
        reason: 'past its starting deadline',
      },
    ]);
  });

  it('counts folded items by job and outcome, and a run once as it ends', async () => {
    const { telemetry, collect, value, emitted } = harness();
    telemetry.itemsFolded('nightly', 30, 2);
    telemetry.itemsFolded('nightly', 5, 0);
    telemetry.itemsFolded('hourly', 0, 1);
    expect(await value(METRIC_NAMES.items, { job: 'nightly', outcome: 'succeeded' })).toBe(35);
    expect(await value(METRIC_NAMES.items, { job: 'nightly', outcome: 'failed' })).toBe(2);
    expect(await value(METRIC_NAMES.items, { job: 'hourly', outcome: 'failed' })).toBe(1);
    expect(await value(METRIC_NAMES.items, { job: 'hourly', outcome: 'succeeded' })).toBeUndefined();

    const created = new Date('2026-03-01T02:00:00.000Z');
    const open = newRunRecord({
      runId: 'nightly/x',
      job: 'nightly',
      trigger: 'manual',
      occurrence: undefined,
      now: created,
      timeoutSeconds: 600,
    });
    telemetry.runEnded(open); // not ended: nothing
    const ended = transition(open, 'timed-out', new Date(created.getTime() + 90_000), 'still planning at its deadline');
    telemetry.runEnded({ ...ended, endReason: 'AccountKey=abc123 in a reason' });
    const duration = pointOf((await collect()).get(METRIC_NAMES.runDuration), { job: 'nightly', state: 'timed-out' });
    expect(duration?.value).toMatchObject({ count: 1, sum: 90_000 });
    expect(emitted()).toEqual([
      {
        [CUSTOM_EVENT_NAME_ATTRIBUTE]: EVENT_NAMES.runEnded,
        job: 'nightly',
        runId: 'nightly/x',
        state: 'timed-out',
        reason: 'AccountKey=*** in a reason',
        durationMs: 90_000,
        planned: 0,
        succeeded: 0,
        failed: 0,
      },
    ]);
  });

  it('reads open runs and storage requests when collected', async () => {
    const requests = new StorageRequestCounter();
    const { telemetry, value } = harness(requests);
    requests.record('blob.lease.renew');
    requests.record('blob.lease.renew');
    requests.record('queue.messages.send');
    let open = 2;
    const untrack = telemetry.trackOpenRuns(() => open);
    expect(await value(METRIC_NAMES.openRuns)).toBe(2);
    open = 1;
    expect(await value(METRIC_NAMES.openRuns)).toBe(1);
    expect(await value(METRIC_NAMES.storageRequests, { operation: 'blob.lease.renew' })).toBe(2);
    expect(await value(METRIC_NAMES.storageRequests, { operation: 'queue.messages.send' })).toBe(1);
    untrack();
    expect(await value(METRIC_NAMES.openRuns)).toBe(0);
    // A term that ends by losing the lease reports no open runs, even before its work stops.
    telemetry.leaderEvent({ type: 'acquired', ...term, leaseId: 'l' });
    telemetry.trackOpenRuns(() => 3);
    telemetry.leaderEvent({ type: 'lost', ...term, reason: 'broken', sinceLastRenewMs: 1 });
    expect(await value(METRIC_NAMES.openRuns)).toBe(0);
    requests.record('blob.lease.renew');
    expect(await value(METRIC_NAMES.storageRequests, { operation: 'blob.lease.renew' })).toBe(3);
  });
});

describe('fencing refusals', () => {
  it('are told to the store once each, where they are made', async () => {
    const refusals: StaleEpochError[] = [];
    const store = new InMemoryDocumentStore({ onStaleEpoch: (refusal) => refusals.push(refusal) });
    const docs = new FencedDocuments<{ n: number }>(store);
    await docs.create('k', 5, { n: 1 });
    const current = await docs.read('k');
    await expect(docs.update('k', 4, () => ({ n: 2 }))).rejects.toBeInstanceOf(StaleEpochError);
    await expect(docs.replace('k', 3, current!, { n: 3 })).rejects.toBeInstanceOf(StaleEpochError);
    await docs.update('k', 5, () => ({ n: 4 }));
    await docs.update('k', 6, () => ({ n: 5 }));
    expect(refusals.map((r) => [r.writerEpoch, r.storedEpoch])).toEqual([
      [4, 5],
      [3, 5],
    ]);
    // The durable starter's own check before it starts anything goes through the same door.
    expect(refuseStale(store, 'jobs/x.json', 1, 2)).toBeInstanceOf(StaleEpochError);
    expect(refusals).toHaveLength(3);
  });

  it('still refuse when the observer throws', async () => {
    const store = new InMemoryDocumentStore({
      onStaleEpoch: () => {
        throw new Error('observer broke');
      },
    });
    const docs = new FencedDocuments<number>(store);
    await docs.create('k', 2, 1);
    await expect(docs.update('k', 1, () => 2)).rejects.toBeInstanceOf(StaleEpochError);
  });
});

describe('telemetry settings', () => {
  it.each([
    [{}, 'none'],
    [{ BATON_METRICS_EXPORTER: 'Console' }, 'console'],
    [{ BATON_METRICS_EXPORTER: ' otlp ' }, 'otlp'],
    [{ BATON_METRICS_EXPORTER: '' }, 'none'],
  ])('BATON_METRICS_EXPORTER %j is %s', (env, expected) => {
    expect(parseMetricsExporter(env)).toBe(expected);
  });

  it('a bad exporter or interval stops start-up with one line naming the setting', () => {
    expect(() => parseMetricsExporter({ BATON_METRICS_EXPORTER: 'prometheus' })).toThrow(
      new InvalidSettingError('BATON_METRICS_EXPORTER', 'BATON_METRICS_EXPORTER must be console, otlp or none'),
    );
    expect(() => setupTelemetry({ BATON_METRICS_EXPORTER: 'stdout' })).toThrow(/^BATON_METRICS_EXPORTER must be/);
    // The runtime refuses it too, whoever composed the SDK.
    expect(() =>
      createBatonRuntime({ AzureWebJobsStorage: 'UseDevelopmentStorage=true', BATON_METRICS_EXPORTER: 'prometheus' }),
    ).toThrow(new InvalidSettingError('BATON_METRICS_EXPORTER', 'BATON_METRICS_EXPORTER must be console, otlp or none'));
    expect(parseMetricExportIntervalMs({})).toBe(60_000);
    expect(parseMetricExportIntervalMs({ OTEL_METRIC_EXPORT_INTERVAL: '5000' })).toBe(5000);
    expect(() => parseMetricExportIntervalMs({ OTEL_METRIC_EXPORT_INTERVAL: '5s' })).toThrow(
      /^OTEL_METRIC_EXPORT_INTERVAL must be/,
    );
  });
});

describe('telemetry setup', () => {
  afterEach(() => {
    metrics.disable();
    logs.disable();
  });

  it('sends events to a logger provider registered after the telemetry was built, as the API would', () => {
    const telemetry = new BatonTelemetry();
    const events = new InMemoryLogRecordExporter();
    logs.setGlobalLoggerProvider(new LoggerProvider({ processors: [new SimpleLogRecordProcessor({ exporter: events })] }));
    telemetry.leaderEvent({ type: 'acquired', ...term, leaseId: 'l' });
    expect(events.getFinishedLogRecords().map((r) => r.attributes[CUSTOM_EVENT_NAME_ATTRIBUTE])).toEqual([
      EVENT_NAMES.leadershipChanged,
    ]);
  });

  it('sets up nothing by default', async () => {
    const setup = setupTelemetry({});
    expect(setup.destinations).toEqual([]);
    await setup.shutdown();
  });

  it('console: one line per data point and per event, on the global providers the runtime uses', async () => {
    const lines: string[] = [];
    const said: string[] = [];
    const setup = setupTelemetry(
      { BATON_METRICS_EXPORTER: 'console' },
      { writeLine: (line) => lines.push(line), log: (m) => said.push(m), instance: 'instance-a' },
    );
    expect(setup.destinations).toEqual(['console']);
    expect(setupTelemetry({ BATON_METRICS_EXPORTER: 'console' })).toBe(setup);
    expect(said).toEqual(['metrics and events go to console']);
    const telemetry = new BatonTelemetry();
    telemetry.leaderEvent({ type: 'acquired', ...term, leaseId: 'l' });
    telemetry.leaderEvent({ type: 'renewed', ...term, latencyMs: 20 });
    telemetry.itemsFolded('nightly', 3, 1);
    expect(lines).toEqual([`event baton.leadership.changed {"identity":"instance-a","epoch":7,"reason":"acquired"}`]);
    // Shutting down exports the last interval's metrics.
    await setup.shutdown();
    expect(lines).toEqual(
      expect.arrayContaining([
        'metric baton.leader.transitions{reason=acquired} 1',
        'metric baton.lease.renew.duration count=1 sum=20 min=20 max=20 ms',
        'metric baton.items{job=nightly,outcome=succeeded} 3',
        'metric baton.items{job=nightly,outcome=failed} 1',
        'metric baton.leader.is_leader 1',
        'metric baton.run.open 0',
      ]),
    );
  });
});

describe('the identity Azure Monitor sends with', () => {
  it.each([
    [{}, undefined],
    [{ APPLICATIONINSIGHTS_AUTHENTICATION_STRING: 'Authorization=AAD' }, 'ManagedIdentityCredential'],
    [
      { APPLICATIONINSIGHTS_AUTHENTICATION_STRING: 'ClientId=00000000-0000-0000-0000-000000000001;Authorization=AAD' },
      'ManagedIdentityCredential',
    ],
    [{ APPLICATIONINSIGHTS_AUTHENTICATION_STRING: ' authorization = aad ; clientid = x ' }, 'ManagedIdentityCredential'],
  ])('%j gives %s', (env, credential) => {
    expect(aadCredential(env)?.constructor.name).toBe(credential);
  });

  it('refuses a string that does not ask for Entra ID, naming the setting', () => {
    expect(() => aadCredential({ APPLICATIONINSIGHTS_AUTHENTICATION_STRING: 'ClientId=x' })).toThrow(
      /^APPLICATIONINSIGHTS_AUTHENTICATION_STRING must say Authorization=AAD/,
    );
  });
});
