import type { TokenCredential } from '@azure/identity';
import { createRequire } from 'node:module';
import type { MeterProvider } from '@opentelemetry/api';
import type { LoggerProvider } from '@opentelemetry/api-logs';
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
  /**
   * The providers Baton's instruments must be taken from (the runtime's `telemetry` option), when
   * anything was set up. Not the global ones as Baton's own `@opentelemetry/api` sees them: an app
   * can hold two copies of the API (Azure Monitor 1.21 nests 1.9 where the app has 1.10), and the
   * API refuses a provider registered by an older copy, so every instrument would be a no-op.
   */
  readonly providers?: { meterProvider: MeterProvider; loggerProvider: LoggerProvider };
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
const SDK_METRICS = '@opentelemetry/sdk-metrics';
const SDK_LOGS = '@opentelemetry/sdk-logs';
const RESOURCES = '@opentelemetry/resources';
const OTLP_METRICS = '@opentelemetry/exporter-metrics-otlp-http';
const OTLP_LOGS = '@opentelemetry/exporter-logs-otlp-http';

type Load = (id: string) => unknown;

/** Whether `err` says `id` itself is missing (and not one of its own dependencies). */
function isMissing(err: unknown, id: string): boolean {
  return (err as { code?: unknown }).code === 'MODULE_NOT_FOUND' && String((err as Error).message).includes(`'${id}'`);
}

/**
 * The exporters are optional peer dependencies: most of what an install of Baton would
 * otherwise weigh, and what every cold start would otherwise download. An app installs the ones
 * its settings name; a setting whose packages are missing fails at start-up with one line that
 * names the setting and the command that fixes it. `load` is for tests of the missing case.
 */
function requirePeers(ids: readonly string[], setting: string, why: string, purpose: string, load: Load): unknown[] {
  const missing: string[] = [];
  const loaded = ids.map((id) => {
    try {
      return load(id);
    } catch (err) {
      if (!isMissing(err, id)) throw err;
      missing.push(id);
      return undefined;
    }
  });
  if (missing.length === 0) return loaded;
  const list = missing.length === 1 ? `${missing[0]} is` : `${missing.slice(0, -1).join(', ')} and ${missing.at(-1)} are`;
  throw new InvalidSettingError(setting, `${why}, and ${list} not installed: npm install ${missing.join(' ')} (${purpose})`);
}

/** `@azure/monitor-opentelemetry`, for `APPLICATIONINSIGHTS_CONNECTION_STRING`. */
export function requireAzureMonitor(load: Load = require): unknown {
  return requirePeers(
    [AZURE_MONITOR],
    'APPLICATIONINSIGHTS_CONNECTION_STRING',
    'APPLICATIONINSIGHTS_CONNECTION_STRING is set',
    'Baton sends its metrics and events to Application Insights through it',
    load,
  )[0];
}

/** The OpenTelemetry SDK packages `BATON_METRICS_EXPORTER=console|otlp` needs, in that order. */
export function exporterPackages(exporter: Exclude<MetricsExporter, 'none'>): string[] {
  return exporter === 'otlp' ? [SDK_METRICS, SDK_LOGS, RESOURCES, OTLP_METRICS, OTLP_LOGS] : [SDK_METRICS, SDK_LOGS, RESOURCES];
}

function requireExporterPackages(exporter: Exclude<MetricsExporter, 'none'>, load: Load): unknown[] {
  const where = exporter === 'otlp' ? 'over OTLP' : 'to the console';
  return requirePeers(
    exporterPackages(exporter),
    'BATON_METRICS_EXPORTER',
    `BATON_METRICS_EXPORTER is ${exporter}`,
    `Baton sends its metrics and events ${where} through them`,
    load,
  );
}

/**
 * What `setupTelemetry` would need, checked without setting anything up: its settings, and the
 * packages they name. For a host that only inspects an app before starting it.
 */
export function checkTelemetrySettings(env: Env = process.env, resolve: Load = require.resolve): void {
  const exporter = parseMetricsExporter(env);
  parseMetricExportIntervalMs(env);
  const azure = readSetting(env, 'APPLICATIONINSIGHTS_CONNECTION_STRING') !== undefined;
  if (azure) requireAzureMonitor(resolve);
  // Where setupTelemetry will load them from (see loadSdk).
  if (exporter !== 'none') requireExporterPackages(exporter, azure ? besideAzureMonitor(resolve).resolve : resolve);
}

/** A require that resolves as `@azure/monitor-opentelemetry` does, from where `resolve` finds it. */
function besideAzureMonitor(resolve: Load = require.resolve): NodeJS.Require {
  return createRequire(resolve(AZURE_MONITOR) as string);
}

interface Sdk {
  kind: Exclude<MetricsExporter, 'none'>;
  metrics: typeof import('@opentelemetry/sdk-metrics');
  logs: typeof import('@opentelemetry/sdk-logs');
  resources: typeof import('@opentelemetry/resources');
  otlp?: {
    metrics: typeof import('@opentelemetry/exporter-metrics-otlp-http');
    logs: typeof import('@opentelemetry/exporter-logs-otlp-http');
  };
}

/**
 * The SDK's packages, loaded only when a setting asks for them. Beside Azure Monitor, the
 * reader and processor must be of the SDK it runs on (its MeterProvider checks its own
 * classes' private fields), so they are loaded from where it resolves them.
 */
function loadSdk(exporter: Exclude<MetricsExporter, 'none'>, azure: boolean): Sdk {
  const [metricsSdk, logsSdk, resources, otlpMetrics, otlpLogs] = requireExporterPackages(
    exporter,
    azure ? besideAzureMonitor() : require,
  );
  return {
    kind: exporter,
    metrics: metricsSdk as Sdk['metrics'],
    logs: logsSdk as Sdk['logs'],
    resources: resources as Sdk['resources'],
    ...(exporter === 'otlp' ? { otlp: { metrics: otlpMetrics, logs: otlpLogs } as NonNullable<Sdk['otlp']> } : {}),
  };
}

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
    exporter === 'none'
      ? undefined
      : localExport(loadSdk(exporter, azure), intervalMs, options.writeLine ?? ((line) => console.log(line)));
  const stops: Array<() => Promise<void>> = [];
  const destinations: Array<'azure-monitor' | Exclude<MetricsExporter, 'none'>> = [];
  let providers: TelemetrySetup['providers'];
  if (azure) {
    const { useAzureMonitor, shutdownAzureMonitor } = requireAzureMonitor() as typeof import('@azure/monitor-opentelemetry');
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
        // Of Azure Monitor's own SDK (loadSdk), whatever the types installed beside Baton say.
        ...(local ? { metricReaders: [local.reader as never], logRecordProcessors: [local.processor as never] } : {}),
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
    // What useAzureMonitor registered, read through the API copies it registered them with.
    const beside = besideAzureMonitor();
    const api = beside('@opentelemetry/api') as typeof import('@opentelemetry/api');
    const apiLogs = beside('@opentelemetry/api-logs') as typeof import('@opentelemetry/api-logs');
    providers = { meterProvider: api.metrics.getMeterProvider(), loggerProvider: apiLogs.logs.getLoggerProvider() };
  } else if (local) {
    const { MeterProvider } = local.sdk.metrics;
    const { LoggerProvider } = local.sdk.logs;
    const resource = resourceOf(local.sdk, env, options.instance);
    const meterProvider = new MeterProvider({ resource, readers: [local.reader] });
    const loggerProvider = new LoggerProvider({ resource, processors: [local.processor] });
    // Loaded here, not at the top: an app that exports nothing never loads the API (see BatonTelemetry).
    (require('@opentelemetry/api') as typeof import('@opentelemetry/api')).metrics.setGlobalMeterProvider(meterProvider);
    (require('@opentelemetry/api-logs') as typeof import('@opentelemetry/api-logs')).logs.setGlobalLoggerProvider(loggerProvider);
    providers = { meterProvider, loggerProvider };
    stops.push(
      () => meterProvider.shutdown(),
      () => loggerProvider.shutdown(),
    );
  }
  if (local) destinations.push(local.kind);
  options.log?.(`metrics and events go to ${destinations.join(' and ')}`);
  const setup: TelemetrySetup = {
    destinations,
    ...(providers ? { providers } : {}),
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

function resourceOf(sdk: Sdk, env: Env, instance: string | undefined): Resource {
  const { defaultResource, resourceFromAttributes } = sdk.resources;
  return defaultResource().merge(
    resourceFromAttributes({
      'service.name': readSetting(env, 'OTEL_SERVICE_NAME') ?? 'baton',
      ...(instance ? { 'service.instance.id': instance } : {}),
    }),
  );
}

function localExport(
  sdk: Sdk,
  intervalMs: number,
  writeLine: (line: string) => void,
): { sdk: Sdk; kind: Exclude<MetricsExporter, 'none'>; reader: MetricReader; processor: LogRecordProcessor } {
  const { kind } = sdk;
  const { PeriodicExportingMetricReader } = sdk.metrics;
  const { BatchLogRecordProcessor, SimpleLogRecordProcessor } = sdk.logs;
  if (sdk.otlp) {
    const { OTLPMetricExporter } = sdk.otlp.metrics;
    const { OTLPLogExporter } = sdk.otlp.logs;
    // The exporters read the endpoint, headers and protocol from the standard OTEL_EXPORTER_OTLP_* settings.
    return {
      sdk,
      kind,
      reader: new PeriodicExportingMetricReader({ exporter: new OTLPMetricExporter(), exportIntervalMillis: intervalMs }),
      processor: new BatchLogRecordProcessor({ exporter: new OTLPLogExporter() }),
    };
  }
  return {
    sdk,
    kind,
    reader: new PeriodicExportingMetricReader({ exporter: new LineMetricExporter(writeLine), exportIntervalMillis: intervalMs }),
    // Events are rare (a change of leader, a run's end): each is written as it happens.
    processor: new SimpleLogRecordProcessor({ exporter: new LineEventExporter(writeLine) }),
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
