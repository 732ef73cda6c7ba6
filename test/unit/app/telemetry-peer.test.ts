import { describe, expect, it } from 'vitest';
import { checkTelemetrySettings, exporterPackages, requireAzureMonitor } from '../../../src/app/telemetry-setup';
import { isBatonError } from '../../../src/errors';

/**
 * `@azure/monitor-opentelemetry` is an optional peer dependency: an app that sends Baton's
 * metrics to Application Insights installs it. Without it, the connection string is a setting
 * that cannot work, said in one line that names it and how to fix it.
 */
const notFound = (id: string) =>
  Object.assign(new Error(`Cannot find module '${id}'\nRequire stack:\n- /app/dist/x.js`), { code: 'MODULE_NOT_FOUND' });
const CONNECTION = 'InstrumentationKey=00000000-0000-0000-0000-000000000000;IngestionEndpoint=https://example.invalid/';

describe('the Application Insights exporter, an optional peer', () => {
  it('loads it when it is installed', () => {
    expect(requireAzureMonitor()).toHaveProperty('useAzureMonitor');
  });

  it('names the setting and the package to install when it is not', () => {
    let error: unknown;
    try {
      requireAzureMonitor((id) => {
        throw notFound(id);
      });
    } catch (err) {
      error = err;
    }
    expect(isBatonError(error, 'InvalidSetting')).toBe(true);
    expect((error as Error).message).toBe(
      'APPLICATIONINSIGHTS_CONNECTION_STRING is set, and @azure/monitor-opentelemetry is not installed: npm install @azure/monitor-opentelemetry (Baton sends its metrics and events to Application Insights through it)',
    );
  });

  it('passes on any other failure as it is (a broken install is not a missing one)', () => {
    const broken = notFound('@opentelemetry/sdk-node');
    expect(() =>
      requireAzureMonitor(() => {
        throw broken;
      }),
    ).toThrow(broken);
  });

  it('is checked up front only when the connection string is set', () => {
    const missing = (id: string) => {
      throw notFound(id);
    };
    expect(() => checkTelemetrySettings({}, missing)).not.toThrow();
    expect(() => checkTelemetrySettings({ APPLICATIONINSIGHTS_CONNECTION_STRING: CONNECTION }, missing)).toThrow(
      /^APPLICATIONINSIGHTS_CONNECTION_STRING is set, and @azure\/monitor-opentelemetry is not installed/,
    );
    expect(() => checkTelemetrySettings({ APPLICATIONINSIGHTS_CONNECTION_STRING: CONNECTION })).not.toThrow();
    expect(() => checkTelemetrySettings({ BATON_METRICS_EXPORTER: 'carrier-pigeon' })).toThrow(/^BATON_METRICS_EXPORTER /);
  });
});

/**
 * The OpenTelemetry SDK and the OTLP exporters are optional peers too: a deployment that sends
 * nothing, or sends to Application Insights, does not download or load them on its cold start.
 */
describe('the console and OTLP exporters, optional peers', () => {
  const without =
    (...gone: string[]) =>
    (id: string) => {
      if (gone.includes(id)) throw notFound(id);
      return require.resolve(id);
    };

  it.each([
    ['console', [], undefined],
    ['otlp', [], undefined],
    [
      'otlp',
      ['@opentelemetry/exporter-metrics-otlp-http', '@opentelemetry/exporter-logs-otlp-http'],
      'BATON_METRICS_EXPORTER is otlp, and @opentelemetry/exporter-metrics-otlp-http and @opentelemetry/exporter-logs-otlp-http are not installed: npm install @opentelemetry/exporter-metrics-otlp-http @opentelemetry/exporter-logs-otlp-http (Baton sends its metrics and events over OTLP through them)',
    ],
    [
      'console',
      ['@opentelemetry/sdk-logs'],
      'BATON_METRICS_EXPORTER is console, and @opentelemetry/sdk-logs is not installed: npm install @opentelemetry/sdk-logs (Baton sends its metrics and events to the console through them)',
    ],
    ['none', exporterPackages('otlp'), undefined],
  ] as const)('BATON_METRICS_EXPORTER=%s without %j', (exporter, gone, message) => {
    const check = () => checkTelemetrySettings({ BATON_METRICS_EXPORTER: exporter }, without(...gone));
    if (message === undefined) {
      expect(check).not.toThrow();
      return;
    }
    let error: unknown;
    try {
      check();
    } catch (err) {
      error = err;
    }
    expect(isBatonError(error, 'InvalidSetting')).toBe(true);
    expect((error as Error).message).toBe(message);
  });

  it('are not dependencies of the package, so an install without them is the default', () => {
    const manifest = require('../../../package.json') as {
      dependencies: Record<string, string>;
      peerDependencies: Record<string, string>;
      peerDependenciesMeta: Record<string, { optional?: boolean }>;
    };
    for (const id of [...exporterPackages('otlp'), '@azure/monitor-opentelemetry']) {
      expect(manifest.dependencies, id).not.toHaveProperty(id);
      expect(manifest.peerDependencies, id).toHaveProperty(id);
      expect(manifest.peerDependenciesMeta[id], id).toEqual({ optional: true });
    }
  });
});
