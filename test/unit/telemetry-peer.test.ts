import { describe, expect, it } from 'vitest';
import { checkTelemetrySettings, requireAzureMonitor } from '../../src/app/telemetry-setup';
import { isBatonError } from '../../src/errors';

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
