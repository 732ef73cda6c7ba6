import type { Attributes, Counter, Histogram, Meter, MeterProvider } from '@opentelemetry/api';
import type { Logger, LoggerProvider } from '@opentelemetry/api-logs';
import type { RecordedOccurrences } from '../hub/occurrence-ledger';
import { firstItemLagMs, isTerminal, startLagMs, type RunRecord } from '../hub/run-record';
import type { LeaderEvent } from '../lease/leader-events';
import { redactSecrets } from '../redact';
import type { StorageRequestCounter } from '../storage/request-counter';
import type { RunTelemetry } from './run-telemetry';

/** The meter and logger Baton's instruments and events come from. */
export const TELEMETRY_SCOPE = 'baton';

/**
 * The names alerts and the workbook in `infra/` query; changing one breaks them, so they are
 * constants and `docs/operating.md` lists them with their attributes.
 */
export const METRIC_NAMES = {
  isLeader: 'baton.leader.is_leader',
  leaderTransitions: 'baton.leader.transitions',
  restingTicks: 'baton.leader.resting_ticks',
  leaseRenewDuration: 'baton.lease.renew.duration',
  fencingRefusals: 'baton.fencing.refusals',
  items: 'baton.items',
  runDuration: 'baton.run.duration',
  openRuns: 'baton.run.open',
  storageRequests: 'baton.storage.requests',
  startLag: 'baton.schedule.start_lag',
  firstItemLag: 'baton.schedule.first_item_lag',
  occurrences: 'baton.schedule.occurrences',
  stops: 'baton.instance.stops',
  retentionPassedBy: 'baton.retention.passed_by',
} as const;

export const EVENT_NAMES = {
  leadershipChanged: 'baton.leadership.changed',
  runEnded: 'baton.run.ended',
  occurrenceNotRun: 'baton.schedule.not_run',
  instanceStopped: 'baton.instance.stopped',
} as const;

/**
 * How an instance's stop reached Baton: the host's `WorkerTerminate` (the `appTerminate` hook),
 * a bare SIGTERM (a container deleted, no hook), or nothing at all (a crash, a kill, a hook cut
 * short), which only a successor can see: it found the lease expired or broken.
 */
export type StopPath = 'hook' | 'signal' | 'none';

/**
 * What became of the lease by the end of a stop: handed over to a successor that asked,
 * released, not released (it expires, or a successor breaks it), or not held.
 */
export type StopLease = 'handed-over' | 'released' | 'not-released' | 'not-held';

/** One instance's stop, as `baton.instance.stopped` carries it. */
export interface InstanceStop {
  instance: string;
  path: StopPath;
  lease: StopLease;
  /** From the stop's start to the lease given back (or given up on); absent for `none`. */
  durationMs?: number;
}

/**
 * The log-record attribute that makes Azure Monitor's exporter send a record as a custom event
 * (`customEvents` in Application Insights) named by its value, with the other attributes as
 * its properties, instead of a trace line.
 */
export const CUSTOM_EVENT_NAME_ATTRIBUTE = 'microsoft.custom_event.name';

/**
 * Where the OpenTelemetry API keeps the providers an SDK registers (its `internal/global-utils`):
 * the metrics key carries the API's major version, and every copy of the API installed shares
 * them. Neither exists until something registers a provider.
 */
const METRICS_GLOBAL = Symbol.for('opentelemetry.js.api.1');
const LOGS_GLOBAL = Symbol.for('io.opentelemetry.js.api.logs');

// The API is loaded only once a provider can receive something: without one, every instrument
// is its no-op, and loading it cost each cold start ~10 ms (bench/benchmarks/footprint.ts).
const api = () => require('@opentelemetry/api') as typeof import('@opentelemetry/api');
const apiLogs = () => require('@opentelemetry/api-logs') as typeof import('@opentelemetry/api-logs');

/** Runs last seconds to hours: the default buckets (up to 10 s) would put nearly all in the last. */
const RUN_DURATION_BUCKETS_MS = [1, 5, 15, 30, 60, 120, 300, 600, 1800, 3600, 7200, 21_600, 43_200, 86_400].map((s) => s * 1000);
/** Lags run from tens of milliseconds (on time) to a lease or more (a failover) and hours (a stall). */
const LAG_BUCKETS_MS = [25, 50, 100, 250, 500, 1000, 2000, 5000, 10_000, 30_000, 60_000, 300_000, 900_000, 3_600_000];
/** A renewal is one storage round trip; past a few seconds it is close to the renew deadline. */
const RENEW_BUCKETS_MS = [5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10_000];

export interface BatonTelemetryOptions {
  /**
   * Where the instruments live. Default: the global provider as it is when this is built, so an
   * SDK (`useAzureMonitor`, or `setupTelemetry` in the app) must be set up before the runtime.
   * Without one, every instrument is OpenTelemetry's no-op.
   */
  meterProvider?: MeterProvider;
  /** Where the two events go; default the global logger provider. */
  loggerProvider?: LoggerProvider;
  /** Reported as `baton.storage.requests` by operation, read when metrics are collected. */
  storageRequests?: StorageRequestCounter;
}

/**
 * Baton's metrics and events on the OpenTelemetry API, for one runtime. The leader's elector
 * feeds it through `leaderEvent`, the engines through `RunTelemetry`, the fenced document store
 * through `fencingRefused`. Hot paths cost a counter add: attribute sets are made once per job
 * or reason, and the gauges and the storage counter are read only when a reader collects.
 */
export class BatonTelemetry implements RunTelemetry {
  /** Absent while no meter provider was given or registered: each record is then a no-op. */
  private readonly instruments: Instruments | undefined;
  private readonly loggerProvider: LoggerProvider | undefined;
  /** Taken on the first event after a logger provider exists (the API's global one proxies too). */
  private events: Logger | undefined;
  /** The epoch of the term this instance holds, while it holds one. */
  private term: { epoch: number } | undefined;
  private openRunsOf: (() => number) | undefined;
  private readonly itemAttributes = new Map<string, { succeeded: Attributes; failed: Attributes }>();
  private readonly transitionAttributes = new Map<string, Attributes>();

  constructor(options: BatonTelemetryOptions = {}) {
    this.loggerProvider = options.loggerProvider;
    const meterProvider = options.meterProvider ?? (METRICS_GLOBAL in globalThis ? api().metrics.getMeterProvider() : undefined);
    if (!meterProvider) return;
    const meter = meterProvider.getMeter(TELEMETRY_SCOPE);
    this.instruments = createInstruments(meter);
    const { ValueType } = api();
    meter
      .createObservableGauge(METRIC_NAMES.isLeader, {
        description: 'Whether this instance holds a leadership term (1) or not (0)',
        valueType: ValueType.INT,
      })
      .addCallback((result) => result.observe(this.term ? 1 : 0));
    meter
      .createObservableGauge(METRIC_NAMES.openRuns, {
        description: "Runs open in this leader's book (0 on an instance that does not lead)",
        unit: '{run}',
        valueType: ValueType.INT,
      })
      .addCallback((result) => result.observe(this.openRunsOf?.() ?? 0));
    const counter = options.storageRequests;
    if (counter) {
      meter
        .createObservableCounter(METRIC_NAMES.storageRequests, {
          description: "Storage requests this instance's clients sent, by operation: what storage bills",
          unit: '{request}',
          valueType: ValueType.INT,
        })
        .addCallback((result) => {
          for (const [operation, count] of Object.entries(counter.snapshot())) result.observe(count, { operation });
        });
    }
  }

  /** The elector's `onEvent`: leadership changes, and the latency of each renewal. */
  leaderEvent(event: LeaderEvent): void {
    switch (event.type) {
      case 'acquired':
        this.term = { epoch: event.epoch };
        this.changeLeadership('acquired', event.identity, event.epoch);
        // The last holder never gave the lease back: whatever stopped it, no shutdown ran to its end.
        if (
          event.after &&
          event.after.holder !== event.identity &&
          (event.after.freedAs === 'expired' || event.after.freedAs === 'broken')
        ) {
          this.instanceStopped({ instance: event.after.holder, path: 'none', lease: 'not-released' });
        }
        return;
      case 'renewed':
        this.instruments?.renewDuration.record(event.latencyMs);
        return;
      case 'lost':
        this.endTerm(`lost-${event.reason}`, event.identity, event.epoch);
        return;
      case 'released':
        this.endTerm(event.restingUntil ? 'rested' : 'released', event.identity, event.epoch);
        return;
      case 'release-failed':
        // A term that ended without a loss but could not give the lease back; it expires.
        this.endTerm('release-failed', event.identity, event.epoch);
        return;
      default:
        return;
    }
  }

  /**
   * An instance stopped: recorded by the instance itself at the end of its shutdown (`hook`,
   * `signal`), or by its successor when the lease had to expire or be broken (`none`).
   */
  instanceStopped(stop: InstanceStop): void {
    this.instruments?.stops.add(1, { path: stop.path, lease: stop.lease });
    this.emit(EVENT_NAMES.instanceStopped, {
      instance: stop.instance,
      path: stop.path,
      lease: stop.lease,
      ...(stop.durationMs !== undefined ? { durationMs: Math.round(stop.durationMs) } : {}),
    });
  }

  /** A coordinator tick found the lease resting: what tells the no-leader alert that the hub is idle, not leaderless. */
  restingTick(): void {
    this.instruments?.restingTicks.add(1);
  }

  /** A fenced write was refused (see `DocumentStore.onStaleEpoch`). */
  fencingRefused(): void {
    this.instruments?.refusals.add(1);
  }

  itemsFolded(job: string, succeeded: number, failed: number): void {
    let attributes = this.itemAttributes.get(job);
    if (!attributes) {
      attributes = { succeeded: { job, outcome: 'succeeded' }, failed: { job, outcome: 'failed' } };
      this.itemAttributes.set(job, attributes);
    }
    if (succeeded > 0) this.instruments?.items.add(succeeded, attributes.succeeded);
    if (failed > 0) this.instruments?.items.add(failed, attributes.failed);
  }

  retentionPassedBy(): void {
    this.instruments?.retentionPassedBy.add(1);
  }

  occurrencesRecorded(job: string, recorded: RecordedOccurrences): void {
    for (const outcome of ['started', 'skipped', 'missed'] as const) {
      if (recorded[outcome] > 0) this.instruments?.occurrences.add(recorded[outcome], { job, outcome });
    }
    for (const event of recorded.events) {
      this.emit(EVENT_NAMES.occurrenceNotRun, {
        job,
        occurrence: event.occurrence ?? '',
        outcome: event.outcome,
        reason: redactSecrets(event.reason ?? ''),
      });
    }
  }

  runStarted(record: RunRecord): void {
    const lag = startLagMs(record);
    if (lag !== null && Number.isFinite(lag)) this.instruments?.startLag.record(Math.max(0, lag), { job: record.job });
  }

  firstItemCounted(record: RunRecord): void {
    // Scheduled runs only, as the start lag: a manual run has no occurrence to be late for.
    const lag = record.occurrence === null ? null : firstItemLagMs(record);
    if (lag !== null && Number.isFinite(lag)) this.instruments?.firstItemLag.record(Math.max(0, lag), { job: record.job });
  }

  runEnded(record: RunRecord): void {
    if (!isTerminal(record.state)) return;
    const durationMs = Date.parse(record.endedAt ?? record.updatedAt) - Date.parse(record.createdAt);
    if (Number.isFinite(durationMs))
      this.instruments?.runDuration.record(Math.max(0, durationMs), { job: record.job, state: record.state });
    const { planned, succeeded, failed } = record.counters;
    this.emit(EVENT_NAMES.runEnded, {
      job: record.job,
      runId: record.runId,
      state: record.state,
      // A run that ended as its items decided has no reason of its own: its counts are the reason.
      reason: redactSecrets(record.endReason ?? `${succeeded} succeeded, ${failed} failed of ${planned}`),
      durationMs: Number.isFinite(durationMs) ? Math.max(0, durationMs) : 0,
      planned,
      succeeded,
      failed,
    });
  }

  trackOpenRuns(count: () => number): () => void {
    this.openRunsOf = count;
    return () => {
      if (this.openRunsOf === count) this.openRunsOf = undefined;
    };
  }

  /** A term ends once: a loss that is followed by a release (deadline, stall) is one transition. */
  private endTerm(reason: string, identity: string, epoch: number): void {
    if (!this.term) return;
    this.term = undefined;
    this.openRunsOf = undefined;
    this.changeLeadership(reason, identity, epoch);
  }

  private changeLeadership(reason: string, identity: string, epoch: number): void {
    let attributes = this.transitionAttributes.get(reason);
    if (!attributes) this.transitionAttributes.set(reason, (attributes = { reason }));
    this.instruments?.transitions.add(1, attributes);
    this.emit(EVENT_NAMES.leadershipChanged, { identity, epoch, reason });
  }

  private emit(name: string, properties: Attributes): void {
    try {
      if (!this.events) {
        if (!this.loggerProvider && !(LOGS_GLOBAL in globalThis)) return;
        this.events = (this.loggerProvider ?? apiLogs().logs.getLoggerProvider()).getLogger(TELEMETRY_SCOPE);
      }
      this.events.emit({
        eventName: name,
        severityNumber: apiLogs().SeverityNumber.INFO,
        severityText: 'INFO',
        body: name,
        attributes: { [CUSTOM_EVENT_NAME_ATTRIBUTE]: name, ...properties },
        // Emitted in the root context, outside any span: trace sampling decides per trace
        // (Azure Monitor drops a record whose span was sampled out when trace-based sampling
        // for logs is on), and a record with no trace has nothing for it to drop.
        context: api().ROOT_CONTEXT,
      });
    } catch {
      // Telemetry must never break the lease loop or a run's end.
    }
  }
}

interface Instruments {
  transitions: Counter;
  restingTicks: Counter;
  renewDuration: Histogram;
  refusals: Counter;
  items: Counter;
  runDuration: Histogram;
  startLag: Histogram;
  firstItemLag: Histogram;
  occurrences: Counter;
  stops: Counter;
  retentionPassedBy: Counter;
}

function createInstruments(meter: Meter): Instruments {
  const { ValueType } = api();
  return {
    transitions: meter.createCounter(METRIC_NAMES.leaderTransitions, {
      description:
        'Leadership terms this instance began (acquired) and ended (released; rested: released with the lease resting until the next occurrence; lost-<reason>; release-failed)',
      unit: '{transition}',
      valueType: ValueType.INT,
    }),
    restingTicks: meter.createCounter(METRIC_NAMES.restingTicks, {
      description:
        'Coordinator ticks of this instance that found the lease resting (its idle leader returned until the next occurrence): the hub is idle by design, not leaderless',
      unit: '{tick}',
      valueType: ValueType.INT,
    }),
    renewDuration: meter.createHistogram(METRIC_NAMES.leaseRenewDuration, {
      description: "How long each successful renewal of the leader's lease took",
      unit: 'ms',
      advice: { explicitBucketBoundaries: RENEW_BUCKETS_MS },
    }),
    refusals: meter.createCounter(METRIC_NAMES.fencingRefusals, {
      description: 'Writes refused because a newer epoch had written the document: a stale leader or writer was stopped',
      unit: '{refusal}',
      valueType: ValueType.INT,
    }),
    items: meter.createCounter(METRIC_NAMES.items, {
      description: "Items the leader's fold counted into their run, by outcome; duplicates are not counted",
      unit: '{item}',
      valueType: ValueType.INT,
    }),
    runDuration: meter.createHistogram(METRIC_NAMES.runDuration, {
      description: 'From the creation of a run to its end, recorded once as it ends',
      unit: 'ms',
      advice: { explicitBucketBoundaries: RUN_DURATION_BUCKETS_MS },
    }),
    startLag: meter.createHistogram(METRIC_NAMES.startLag, {
      description:
        'From a scheduled occurrence to the creation of its run, by storage time; recorded once, as the run is created',
      unit: 'ms',
      advice: { explicitBucketBoundaries: LAG_BUCKETS_MS },
    }),
    firstItemLag: meter.createHistogram(METRIC_NAMES.firstItemLag, {
      description:
        "From a scheduled occurrence to the leader's first count of one of its run's items, by storage time; recorded once",
      unit: 'ms',
      advice: { explicitBucketBoundaries: LAG_BUCKETS_MS },
    }),
    occurrences: meter.createCounter(METRIC_NAMES.occurrences, {
      description: 'Scheduled occurrences the leader recorded, by job and outcome (started, skipped, missed); each once',
      unit: '{occurrence}',
      valueType: ValueType.INT,
    }),
    stops: meter.createCounter(METRIC_NAMES.stops, {
      description:
        'Instance stops, by path (hook: the host asked; signal: a bare SIGTERM; none: a successor found the lease expired or broken) and what became of the lease (handed-over, released, not-released, not-held)',
      unit: '{stop}',
      valueType: ValueType.INT,
    }),
    retentionPassedBy: meter.createCounter(METRIC_NAMES.retentionPassedBy, {
      description:
        'Runs past retention that the sweep passed by after failing to delete them several slices in a row (a legal hold, a blob lease, a role taken away); each is tried again next pass',
      unit: '{run}',
      valueType: ValueType.INT,
    }),
  };
}
