import type { TokenCredential } from '@azure/identity';
import { metrics } from '@opentelemetry/api';
import { logs } from '@opentelemetry/api-logs';
import type { Resource } from '@opentelemetry/resources';
import type { LogRecordExporter, LogRecordProcessor, ReadableLogRecord } from '@opentelemetry/sdk-logs';
import type { MetricReader, PushMetricExporter, ResourceMetrics } from '@opentelemetry/sdk-metrics';
import { InvalidSettingError } from '../errors';
import { redactSecrets } from '../redact';
import { readSetting, type Env } from '../storage/setting';
import { CUSTOM_EVENT_NAME_ATTRIBUTE } from '../telemetry/baton-telemetry';
import { parseMetricExportIntervalMs, parseMetricsExporter, type MetricsExporter } from './settings';

export interface TelemetrySetupOptions {
  /**
   * Where the `console` exporter writes, one line per data point or event (default stdout). The
   * local cluster's instances pass their own: their stdout carries JSON events for the cluster.
   */
  writeLine?: (line: string) => void;
  /** Told which exporters were chosen; never a setting's value. */
  log?: (message: string) => void;
  /** `service.instance.id` of what is exported (the instance's lease identity, say). */
  instance?: string;
}

export interface TelemetrySetup {
  /** Where metrics and events go: Application Insights and/or the local exporter (`none`: nowhere). */
  readonly destinations: ReadonlyArray<'azure-monitor' | Exclude<MetricsExporter, 'none'>>;
  /** Exports what is pending and stops; gives up when `signal` aborts. */
  shutdown(options?: { signal?: AbortSignal }): Promise<void>;
}

let active: TelemetrySetup | undefined;

/**
 * The identity to send with, from `APPLICATIONINSIGHTS_AUTHENTICATION_STRING`
 * (`Authorization=AAD;ClientId=<user-assigned identity>`), the setting the Functions host reads
 * for its own telemetry. The deploy turns off the component's key-based ingestion, and the
 * exporter does not read that setting itself: without this, every export would be refused.
 */
export function aadCredential(env: Env): TokenCredential | undefined {
  const raw = readSetting(env, 'APPLICATIONINSIGHTS_AUTHENTICATION_STRING');
  if (!raw) return undefined;
  const parts = new Map(
    raw
      .split(';')
      .map((part) => part.split('=').map((s) => s.trim()))
      .filter((kv): kv is [string, string] => kv.length === 2 && kv[0] !== '')
      .map(([k, v]) => [k.toLowerCase(), v] as const),
  );
  if (parts.get('authorization')?.toLowerCase() !== 'aad') {
    throw new InvalidSettingError(
      'APPLICATIONINSIGHTS_AUTHENTICATION_STRING',
      'APPLICATIONINSIGHTS_AUTHENTICATION_STRING must say Authorization=AAD (and ClientId=<identity client id> for a user-assigned identity)',
    );
  }
  const { ManagedIdentityCredential } = require('@azure/identity') as typeof import('@azure/identity');
  const clientId = parts.get('clientid');
  return clientId ? new ManagedIdentityCredential({ clientId }) : new ManagedIdentityCredential();
}

const AZURE_MONITOR = '@azure/monitor-opentelemetry';

/**
 * The Application Insights exporter is an optional peer dependency (its tree is most of what an
 * install of Baton would otherwise weigh): an app that sets the connection string installs it.
 * `load` is for tests of the missing case.
 */
export function requireAzureMonitor(load: (id: string) => unknown = require): unknown {
  try {
    return load(AZURE_MONITOR);
  } catch (err) {
    const missing =
      (err as { code?: unknown }).code === 'MODULE_NOT_FOUND' && String((err as Error).message).includes(AZURE_MONITOR);
    if (!missing) throw err;
    throw new InvalidSettingError(
      'APPLICATIONINSIGHTS_CONNECTION_STRING',
      `APPLICATIONINSIGHTS_CONNECTION_STRING is set, and ${AZURE_MONITOR} is not installed: npm install ${AZURE_MONITOR} (Baton sends its metrics and events to Application Insights through it)`,
    );
  }
}

/**
 * What `setupTelemetry` would need, checked without setting anything up: its settings, and the
 * exporter package when the Application Insights connection string is set. For a host that only
 * inspects an app before starting it.
 */
export function checkTelemetrySettings(env: Env = process.env, resolve: (id: string) => unknown = require.resolve): void {
  parseMetricsExporter(env);
  parseMetricExportIntervalMs(env);
  if (readSetting(env, 'APPLICATIONINSIGHTS_CONNECTION_STRING') !== undefined) requireAzureMonitor(resolve);
}

/**
 * The SDK's packages, loaded only when a setting asks for them: Azure Monitor alone takes about
 * 0.4 s to load, which every cold start of an app without it would otherwise pay.
 */
const sdk = {
  azureMonitor: () => requireAzureMonitor() as typeof import('@azure/monitor-opentelemetry'),
  metrics: () => require('@opentelemetry/sdk-metrics') as typeof import('@opentelemetry/sdk-metrics'),
  logs: () => require('@opentelemetry/sdk-logs') as typeof import('@opentelemetry/sdk-logs'),
  resources: () => require('@opentelemetry/resources') as typeof import('@opentelemetry/resources'),
  otlpMetrics: () =>
    require('@opentelemetry/exporter-metrics-otlp-http') as typeof import('@opentelemetry/exporter-metrics-otlp-http'),
  otlpLogs: () => require('@opentelemetry/exporter-logs-otlp-http') as typeof import('@opentelemetry/exporter-logs-otlp-http'),
};

/**
 * Sets up the OpenTelemetry SDK for the process, once, before the runtime is built (its meter
 * and logger are taken from the global providers when it is):
 * - `APPLICATIONINSIGHTS_CONNECTION_STRING` set: Azure Monitor (`useAzureMonitor`), which reads
 *   the connection string itself; Baton's events become `customEvents`, its metrics
 *   `customMetrics`.
 * - `BATON_METRICS_EXPORTER=console|otlp` (default `none`): also, or instead, print each data
 *   point and event as a line, or send them over OTLP/HTTP (`OTEL_EXPORTER_OTLP_*` settings).
 * - neither: nothing is set up, and every instrument stays OpenTelemetry's no-op.
 * A bad setting throws `InvalidSettingError` naming it; no setting's value is ever logged.
 * A second call returns the first setup.
 */
export function setupTelemetry(env: Env = process.env, options: TelemetrySetupOptions = {}): TelemetrySetup {
  if (active) return active;
  const exporter = parseMetricsExporter(env);
  const intervalMs = parseMetricExportIntervalMs(env);
  const azure = readSetting(env, 'APPLICATIONINSIGHTS_CONNECTION_STRING') !== undefined;
  if (!azure && exporter === 'none') return { destinations: [], shutdown: () => Promise.resolve() };

  const local =
    exporter === 'none' ? undefined : localExport(exporter, intervalMs, options.writeLine ?? ((line) => console.log(line)));
  const stops: Array<() => Promise<void>> = [];
  const destinations: Array<'azure-monitor' | Exclude<MetricsExporter, 'none'>> = [];
  if (azure) {
    const { useAzureMonitor, shutdownAzureMonitor } = sdk.azureMonitor();
    try {
      // No resource of Baton's own: Azure's detectors name the app and the instance, as the
      // Functions host names them in its own telemetry.
      const credential = aadCredential(env);
      useAzureMonitor({
        ...(credential ? { azureMonitorExporterOptions: { credential } } : {}),
        // Every storage call would otherwise be a dependency span: the leader renews, polls and
        // drains all the time, so traces would cost far more than the metrics they sit beside.
        // The Functions host already records each invocation.
        instrumentationOptions: { http: { enabled: false }, azureSdk: { enabled: false } },
        ...(local ? { metricReaders: [local.reader], logRecordProcessors: [local.processor] } : {}),
      });
    } catch {
      // Its message may quote the connection string.
      throw new InvalidSettingError(
        'APPLICATIONINSIGHTS_CONNECTION_STRING',
        'APPLICATIONINSIGHTS_CONNECTION_STRING is not a connection string Azure Monitor accepts',
      );
    }
    stops.push(() => shutdownAzureMonitor());
    destinations.push('azure-monitor');
  } else if (local) {
    const { MeterProvider } = sdk.metrics();
    const { LoggerProvider } = sdk.logs();
    const resource = resourceOf(env, options.instance);
    const meterProvider = new MeterProvider({ resource, readers: [local.reader] });
    const loggerProvider = new LoggerProvider({ resource, processors: [local.processor] });
    metrics.setGlobalMeterProvider(meterProvider);
    logs.setGlobalLoggerProvider(loggerProvider);
    stops.push(
      () => meterProvider.shutdown(),
      () => loggerProvider.shutdown(),
    );
  }
  if (local) destinations.push(local.kind);
  options.log?.(`metrics and events go to ${destinations.join(' and ')}`);
  const setup: TelemetrySetup = {
    destinations,
    shutdown: async ({ signal } = {}) => {
      if (active === setup) active = undefined;
      const done = Promise.allSettled(stops.map((stop) => stop())).then(() => undefined);
      if (!signal) return done;
      if (signal.aborted) return;
      await Promise.race([
        done,
        new Promise<void>((resolve) => signal.addEventListener('abort', () => resolve(), { once: true })),
      ]);
    },
  };
  active = setup;
  return setup;
}

function resourceOf(env: Env, instance: string | undefined): Resource {
  const { defaultResource, resourceFromAttributes } = sdk.resources();
  return defaultResource().merge(
    resourceFromAttributes({
      'service.name': readSetting(env, 'OTEL_SERVICE_NAME') ?? 'baton',
      ...(instance ? { 'service.instance.id': instance } : {}),
    }),
  );
}

function localExport(
  kind: Exclude<MetricsExporter, 'none'>,
  intervalMs: number,
  writeLine: (line: string) => void,
): { kind: Exclude<MetricsExporter, 'none'>; reader: MetricReader; processor: LogRecordProcessor } {
  const { PeriodicExportingMetricReader } = sdk.metrics();
  const { BatchLogRecordProcessor, SimpleLogRecordProcessor } = sdk.logs();
  if (kind === 'otlp') {
    const { OTLPMetricExporter } = sdk.otlpMetrics();
    const { OTLPLogExporter } = sdk.otlpLogs();
    // The exporters read the endpoint, headers and protocol from the standard OTEL_EXPORTER_OTLP_* settings.
    return {
      kind,
      reader: new PeriodicExportingMetricReader({ exporter: new OTLPMetricExporter(), exportIntervalMillis: intervalMs }),
      processor: new BatchLogRecordProcessor(new OTLPLogExporter()),
    };
  }
  return {
    kind,
    reader: new PeriodicExportingMetricReader({ exporter: new LineMetricExporter(writeLine), exportIntervalMillis: intervalMs }),
    // Events are rare (a change of leader, a run's end): each is written as it happens.
    processor: new SimpleLogRecordProcessor(new LineEventExporter(writeLine)),
  };
}

type ExportDone = Parameters<PushMetricExporter['export']>[1];
const SUCCESS: Parameters<ExportDone>[0] = { code: 0 };

/**
 * One line per data point, `metric <name>{k=v,…} <value>`, rather than the SDK console
 * exporter's multi-line objects: readable in a terminal, greppable in a log, and safe beside
 * an instance's JSON event lines.
 */
export class LineMetricExporter implements PushMetricExporter {
  constructor(private readonly writeLine: (line: string) => void) {}

  export(batch: ResourceMetrics, done: ExportDone): void {
    for (const scope of batch.scopeMetrics) {
      for (const metric of scope.metrics) {
        const unit = metric.descriptor.unit && !metric.descriptor.unit.startsWith('{') ? ` ${metric.descriptor.unit}` : '';
        for (const point of metric.dataPoints) {
          const labels = Object.entries(point.attributes)
            .map(([k, v]) => `${k}=${String(v)}`)
            .join(',');
          const name = `${metric.descriptor.name}${labels ? `{${labels}}` : ''}`;
          const value = point.value;
          if (typeof value === 'object' && 'buckets' in value) {
            const { count, sum, min, max } = value;
            this.writeLine(
              redactSecrets(`metric ${name} count=${count} sum=${sum ?? ''} min=${min ?? ''} max=${max ?? ''}${unit}`),
            );
          } else if (typeof value === 'number') {
            this.writeLine(redactSecrets(`metric ${name} ${value}${unit}`));
          }
        }
      }
    }
    done(SUCCESS);
  }

  forceFlush(): Promise<void> {
    return Promise.resolve();
  }

  shutdown(): Promise<void> {
    return Promise.resolve();
  }
}

/** One line per event, `event <name> {properties as JSON}`. */
export class LineEventExporter implements LogRecordExporter {
  constructor(private readonly writeLine: (line: string) => void) {}

  export(records: ReadableLogRecord[], done: ExportDone): void {
    for (const record of records) {
      const { [CUSTOM_EVENT_NAME_ATTRIBUTE]: name, ...properties } = record.attributes;
      this.writeLine(redactSecrets(`event ${String(name ?? record.eventName ?? record.body)} ${JSON.stringify(properties)}`));
    }
    done(SUCCESS);
  }

  forceFlush(): Promise<void> {
    return Promise.resolve();
  }

  shutdown(): Promise<void> {
    return Promise.resolve();
  }
}
