import { describe, expect, it } from 'vitest';
import { InvalidSettingError } from '../../../src/errors.js';
import { resolveElectorOptions } from '../../../src/lease/elector-options.js';
import { InMemoryLeaseStore } from '../../../src/lease/in-memory-lease-store.js';
import {
  parseBatonSettings,
  parseLogLevel,
  parseMetricExportIntervalMs,
  parseMetricsExporter,
} from '../../../src/app/settings.js';
import { parseStorageSettings } from '../../../src/storage/connection.js';
import { redactSecrets } from '../../../src/redact.js';
import { type Env } from '../../../src/storage/setting.js';
import { oneLineError } from '../../support/errors';

const KEY = 'Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==';
const SAS = 'sv=2022-11-02&ss=bq&srt=sco&sp=rwdlac&se=2030-01-01T00:00:00Z&sig=SeCrEtSiGnAtUrE%3D';
const GUID = '6f1c2c7e-7b1f-4a55-9d0e-2f3b1c4d5e6f';

function settingError(fn: () => unknown): InvalidSettingError {
  const e = oneLineError(InvalidSettingError, fn);
  expect(e.code).toBe('InvalidSetting');
  return e;
}

describe('parseStorageSettings: connection strings', () => {
  it.each<[string, string, string]>([
    [
      'account key with suffix',
      `DefaultEndpointsProtocol=https;AccountName=acct;AccountKey=${KEY};EndpointSuffix=core.windows.net`,
      `DefaultEndpointsProtocol=https;AccountName=acct;AccountKey=${KEY};BlobEndpoint=https://acct.blob.core.windows.net;QueueEndpoint=https://acct.queue.core.windows.net`,
    ],
    [
      'account key, defaults filled in, keys case-insensitive',
      `accountname=acct;ACCOUNTKEY=${KEY};`,
      `DefaultEndpointsProtocol=https;AccountName=acct;AccountKey=${KEY};BlobEndpoint=https://acct.blob.core.windows.net;QueueEndpoint=https://acct.queue.core.windows.net`,
    ],
    [
      'Azurite with explicit endpoints',
      `DefaultEndpointsProtocol=http;AccountName=devstoreaccount1;AccountKey=${KEY};BlobEndpoint=http://127.0.0.1:10000/devstoreaccount1;QueueEndpoint=http://127.0.0.1:10001/devstoreaccount1;`,
      `DefaultEndpointsProtocol=http;AccountName=devstoreaccount1;AccountKey=${KEY};BlobEndpoint=http://127.0.0.1:10000/devstoreaccount1;QueueEndpoint=http://127.0.0.1:10001/devstoreaccount1`,
    ],
    [
      'SAS with endpoints',
      `BlobEndpoint=https://acct.blob.core.windows.net/;QueueEndpoint=https://acct.queue.core.windows.net/;SharedAccessSignature=${SAS}`,
      `SharedAccessSignature=${SAS};BlobEndpoint=https://acct.blob.core.windows.net/;QueueEndpoint=https://acct.queue.core.windows.net/`,
    ],
    [
      'SAS with account name derives endpoints',
      `AccountName=acct;SharedAccessSignature=${SAS}`,
      `AccountName=acct;SharedAccessSignature=${SAS};BlobEndpoint=https://acct.blob.core.windows.net;QueueEndpoint=https://acct.queue.core.windows.net`,
    ],
    ['development storage', 'UseDevelopmentStorage=true', 'UseDevelopmentStorage=true'],
    ['development storage, any case', ' usedevelopmentstorage=TRUE; ', 'UseDevelopmentStorage=true'],
  ])('accepts %s', (_name, value, normalized) => {
    expect(parseStorageSettings({ AzureWebJobsStorage: value })).toEqual({
      kind: 'connectionString',
      connectionString: normalized,
    });
  });

  it('prefers the connection string over identity settings', () => {
    const env = { AzureWebJobsStorage: 'UseDevelopmentStorage=true', AzureWebJobsStorage__accountName: 'acct' };
    expect(parseStorageSettings(env).kind).toBe('connectionString');
  });

  it('honours a custom prefix', () => {
    const env = { MyConn: 'UseDevelopmentStorage=true', MyConn2__accountName: 'acct' };
    expect(parseStorageSettings(env, { prefix: 'MyConn' }).kind).toBe('connectionString');
    expect(parseStorageSettings(env, { prefix: 'MyConn2' })).toMatchObject({ kind: 'identity' });
  });

  it.each<[string, string, string]>([
    ['a part without =', `AccountName=acct;${KEY.replace(/=/g, '')}`, 'part 2 is not a key=value pair'],
    ['an unknown key', `AccountName=acct;Acountkey=${KEY}`, 'part 2 has an unknown key'],
    ['a duplicated key', `AccountName=acct;AccountKey=${KEY};AccountKey=${KEY}`, 'AccountKey appears more than once'],
    ['an empty value', 'AccountName=acct;AccountKey=', 'AccountKey is empty'],
    ['a key that is not base64', `AccountName=acct;AccountKey=${KEY.slice(0, -3)}!!`, 'AccountKey is not base64'],
    ['a key without account name', `AccountKey=${KEY}`, 'AccountKey needs AccountName'],
    [
      'no credentials',
      'AccountName=acct;EndpointSuffix=core.windows.net',
      'neither AccountName and AccountKey nor SharedAccessSignature',
    ],
    [
      'SAS without queue endpoint',
      `BlobEndpoint=https://a.blob.core.windows.net;SharedAccessSignature=${SAS}`,
      'no QueueEndpoint',
    ],
    [
      'a bad protocol',
      `DefaultEndpointsProtocol=ftp;AccountName=acct;AccountKey=${KEY}`,
      'DefaultEndpointsProtocol must be https or http',
    ],
    ['a bad endpoint', `AccountName=acct;AccountKey=${KEY};BlobEndpoint=not a url`, 'BlobEndpoint is not an http(s) URL'],
    ['development storage = false', 'UseDevelopmentStorage=false', 'UseDevelopmentStorage must be true'],
    [
      'development storage mixed with a key',
      `UseDevelopmentStorage=true;AccountKey=${KEY}`,
      'cannot be combined with AccountKey',
    ],
    ['plain garbage', 'hello', 'part 1 is not a key=value pair'],
  ])('rejects %s without echoing it', (_name, value, problem) => {
    const err = settingError(() => parseStorageSettings({ AzureWebJobsStorage: value }));
    expect(err.setting).toBe('AzureWebJobsStorage');
    expect(err.message).toContain('AzureWebJobsStorage is not a valid storage connection string: ');
    expect(err.message).toContain(problem);
    expect(err.message).not.toContain(KEY.slice(0, 20));
    expect(err.message).not.toContain('SeCrEt');
  });
});

describe('parseStorageSettings: identity', () => {
  const blob = 'https://acct.blob.core.windows.net';
  const queue = 'https://acct.queue.core.windows.net';

  it.each<[string, Env, object]>([
    [
      'explicit URIs',
      { AzureWebJobsStorage__blobServiceUri: blob, AzureWebJobsStorage__queueServiceUri: queue },
      { kind: 'identity', blobServiceUri: blob, queueServiceUri: queue },
    ],
    [
      'accountName',
      { AzureWebJobsStorage__accountName: 'acct' },
      { kind: 'identity', blobServiceUri: blob, queueServiceUri: queue },
    ],
    [
      'URIs win over accountName',
      {
        AzureWebJobsStorage__accountName: 'other',
        AzureWebJobsStorage__blobServiceUri: blob,
        AzureWebJobsStorage__queueServiceUri: queue,
      },
      { kind: 'identity', blobServiceUri: blob, queueServiceUri: queue },
    ],
    [
      'one URI plus accountName',
      { AzureWebJobsStorage__accountName: 'other', AzureWebJobsStorage__blobServiceUri: blob },
      { kind: 'identity', blobServiceUri: blob, queueServiceUri: 'https://other.queue.core.windows.net' },
    ],
    [
      'http on localhost',
      {
        AzureWebJobsStorage__blobServiceUri: 'http://127.0.0.1:10000/devstoreaccount1',
        AzureWebJobsStorage__queueServiceUri: 'http://localhost:10001/devstoreaccount1',
      },
      {
        kind: 'identity',
        blobServiceUri: 'http://127.0.0.1:10000/devstoreaccount1',
        queueServiceUri: 'http://localhost:10001/devstoreaccount1',
      },
    ],
    [
      'managed identity with client id (credential case-insensitive)',
      {
        AzureWebJobsStorage__accountName: 'acct',
        AzureWebJobsStorage__credential: 'ManagedIdentity',
        AzureWebJobsStorage__clientId: GUID,
      },
      { kind: 'identity', blobServiceUri: blob, queueServiceUri: queue, credential: 'managedidentity', clientId: GUID },
    ],
    [
      'blank connection string and blank optional settings',
      { AzureWebJobsStorage: '  ', AzureWebJobsStorage__accountName: 'acct', AzureWebJobsStorage__credential: '' },
      { kind: 'identity', blobServiceUri: blob, queueServiceUri: queue },
    ],
  ])('accepts %s', (_name, env, expected) => {
    expect(parseStorageSettings(env)).toStrictEqual(expected);
  });

  it.each<[string, Env, string, string]>([
    [
      'nothing set',
      {},
      'AzureWebJobsStorage',
      'AzureWebJobsStorage is not set: set a connection string, or AzureWebJobsStorage__blobServiceUri and __queueServiceUri (or __accountName) for an identity-based connection',
    ],
    [
      'only the blob URI',
      { AzureWebJobsStorage__blobServiceUri: blob },
      'AzureWebJobsStorage__queueServiceUri',
      'AzureWebJobsStorage__queueServiceUri is not set',
    ],
    [
      'only the queue URI',
      { AzureWebJobsStorage__queueServiceUri: queue },
      'AzureWebJobsStorage__blobServiceUri',
      'AzureWebJobsStorage__blobServiceUri is not set',
    ],
    [
      'http to a remote host',
      { AzureWebJobsStorage__blobServiceUri: 'http://acct.blob.core.windows.net', AzureWebJobsStorage__queueServiceUri: queue },
      'AzureWebJobsStorage__blobServiceUri',
      'AzureWebJobsStorage__blobServiceUri must be an https URL',
    ],
    [
      'a URI that is not a URL',
      { AzureWebJobsStorage__blobServiceUri: blob, AzureWebJobsStorage__queueServiceUri: 'acct.queue' },
      'AzureWebJobsStorage__queueServiceUri',
      'AzureWebJobsStorage__queueServiceUri must be an https URL',
    ],
    [
      'a bad account name',
      { AzureWebJobsStorage__accountName: 'My_Account' },
      'AzureWebJobsStorage__accountName',
      'AzureWebJobsStorage__accountName must be a storage account name',
    ],
    [
      'a bad credential',
      { AzureWebJobsStorage__accountName: 'acct', AzureWebJobsStorage__credential: 'clientsecret' },
      'AzureWebJobsStorage__credential',
      'AzureWebJobsStorage__credential must be managedidentity',
    ],
    [
      'a bad client id',
      { AzureWebJobsStorage__accountName: 'acct', AzureWebJobsStorage__clientId: 'not-a-guid' },
      'AzureWebJobsStorage__clientId',
      'AzureWebJobsStorage__clientId must be a GUID',
    ],
  ])('rejects %s', (_name, env, setting, message) => {
    const err = settingError(() => parseStorageSettings(env));
    expect(err.setting).toBe(setting);
    expect(err.message.startsWith(message)).toBe(true);
  });
});

describe('parseBatonSettings', () => {
  it('turns crash takeover off at BATON_TAKEOVER_MS=0', () => {
    expect(parseBatonSettings({ BATON_TAKEOVER_MS: '0' }).takeoverMs).toBeUndefined();
  });

  it('reads each unset setting as its documented default would read', () => {
    // An unset setting takes its fallback without building its schema; the two must agree.
    const documented = {
      BATON_HUB: 'baton',
      BATON_LEASE_SECONDS: '15',
      BATON_TAKEOVER_MS: '3000',
      BATON_LEASE_CONTAINER: 'leases',
      BATON_COORDINATOR_SCHEDULE: '*/10 * * * * *',
      BATON_TERM_SECONDS: '60',
      BATON_REST_WHEN_IDLE: 'true',
      BATON_MAX_ATTEMPTS: '5',
      BATON_MAX_IN_FLIGHT: '4096',
      BATON_ENGINE: 'queue',
      BATON_LEADER_PRIORITY: '0',
      BATON_RETENTION_DAYS: '30',
      BATON_OUTPUT_RETENTION_DAYS: '30',
      BATON_HTTP_AUTH: 'keys',
      BATON_LOG_LEVEL: 'info',
      BATON_METRICS_EXPORTER: 'none',
      OTEL_METRIC_EXPORT_INTERVAL: '60000',
    };
    expect(parseBatonSettings({})).toEqual(parseBatonSettings(documented));
    expect(parseLogLevel({})).toBe(parseLogLevel(documented));
    expect(parseMetricsExporter({})).toBe(parseMetricsExporter(documented));
    expect(parseMetricExportIntervalMs({})).toBe(parseMetricExportIntervalMs(documented));
    // And an output retention left unset follows the runs' retention.
    expect(parseBatonSettings({ BATON_RETENTION_DAYS: '7' }).retention).toEqual({ runDays: 7, outputDays: 7 });
  });

  it('defaults', () => {
    expect(parseBatonSettings({})).toEqual({
      hub: 'baton',
      leaseDurationSeconds: 15,
      renewDeadlineMs: 10_000,
      takeoverMs: 3000,
      leaseContainer: 'leases',
      coordinatorSchedule: '*/10 * * * * *',
      termSeconds: 60,
      restWhenIdle: true,
      maxAttempts: 5,
      maxInFlightMessages: 4096,
      engine: 'queue',
      queueShards: 1,
      leaderPriority: 0,
      appVersion: undefined,
      retention: { runDays: 30, outputDays: 30 },
      httpAuth: 'keys',
    });
  });

  it.each<[string, Env, { runDays: number; outputDays: number }]>([
    ['a longer retention keeps outputs as long', { BATON_RETENTION_DAYS: '90' }, { runDays: 90, outputDays: 90 }],
    ['outputs kept longer', { BATON_OUTPUT_RETENTION_DAYS: '365' }, { runDays: 30, outputDays: 365 }],
    ['outputs kept shorter', { BATON_RETENTION_DAYS: '60', BATON_OUTPUT_RETENTION_DAYS: '7' }, { runDays: 60, outputDays: 7 }],
    ['the shortest', { BATON_RETENTION_DAYS: '1', BATON_OUTPUT_RETENTION_DAYS: '1' }, { runDays: 1, outputDays: 1 }],
    ['a century', { BATON_RETENTION_DAYS: '36500' }, { runDays: 36_500, outputDays: 36_500 }],
    [
      'blank output setting: as long as the run',
      { BATON_RETENTION_DAYS: '45', BATON_OUTPUT_RETENTION_DAYS: ' ' },
      { runDays: 45, outputDays: 45 },
    ],
  ])('reads retention: %s', (_name, env, retention) => {
    expect(parseBatonSettings(env).retention).toEqual(retention);
  });

  it.each<[string, Env, number]>([
    ['one shard', { BATON_QUEUE_SHARDS: '1' }, 1],
    ['four shards', { BATON_QUEUE_SHARDS: '4' }, 4],
    ['the most shards, with the longest hub they allow', { BATON_QUEUE_SHARDS: '16', BATON_HUB: 'h'.repeat(47) }, 16],
    ['ten shards, with the longest hub they allow', { BATON_QUEUE_SHARDS: '10', BATON_HUB: 'h'.repeat(48) }, 10],
    ['one shard, with the longest hub', { BATON_QUEUE_SHARDS: '1', BATON_HUB: 'h'.repeat(51) }, 1],
    ['one shard on the durable engine', { BATON_QUEUE_SHARDS: '1', BATON_ENGINE: 'durable' }, 1],
  ])('reads BATON_QUEUE_SHARDS: %s', (_name, env, shards) => {
    expect(parseBatonSettings(env).queueShards).toBe(shards);
  });

  it.each([
    ['baton', true],
    ['nightly1', true],
    ['abc', true],
    ['h'.repeat(45), true],
    ['ab', false],
    ['h'.repeat(46), false],
    ['night-jobs', false],
    ['1nightly', false],
  ])('under the durable engine, BATON_HUB %s names a task hub: %s', (hub, ok) => {
    const parse = () => parseBatonSettings({ BATON_ENGINE: 'durable', BATON_HUB: hub });
    if (ok) expect(parse().hub).toBe(hub);
    else expect(parse).toThrow(/^BATON_HUB \(.+\) names the Durable task hub/);
    // The queue engine names no task hub: any valid hub does.
    expect(parseBatonSettings({ BATON_HUB: hub }).hub).toBe(hub);
  });

  it('reads every setting', () => {
    const env = {
      BATON_HUB: 'nightly1',
      BATON_LEASE_SECONDS: '60',
      BATON_RENEW_DEADLINE_SECONDS: '40',
      BATON_TAKEOVER_MS: '5000',
      BATON_LEASE_CONTAINER: 'my-leases',
      BATON_COORDINATOR_SCHEDULE: '0 * * * * *',
      BATON_TERM_SECONDS: '120',
      BATON_REST_WHEN_IDLE: 'False',
      BATON_MAX_ATTEMPTS: '3',
      BATON_MAX_IN_FLIGHT: '256',
      BATON_ENGINE: 'durable',
      BATON_LEADER_PRIORITY: '7',
      BATON_APP_VERSION: '2.1.0-rc.1+build.5d1e',
      BATON_RETENTION_DAYS: '90',
      BATON_OUTPUT_RETENTION_DAYS: '400',
      BATON_HTTP_AUTH: 'Entra',
      WEBSITE_SITE_NAME: 'func-baton',
      WEBSITE_AUTH_ENABLED: 'True',
    };
    expect(parseBatonSettings(env)).toEqual({
      hub: 'nightly1',
      leaseDurationSeconds: 60,
      renewDeadlineMs: 40_000,
      takeoverMs: 5000,
      leaseContainer: 'my-leases',
      coordinatorSchedule: '0 * * * * *',
      termSeconds: 120,
      restWhenIdle: false,
      maxAttempts: 3,
      maxInFlightMessages: 256,
      engine: 'durable',
      queueShards: 1,
      leaderPriority: 7,
      appVersion: '2.1.0-rc.1+build.5d1e',
      retention: { runDays: 90, outputDays: 400 },
      httpAuth: 'entra',
    });
  });

  it('takes Entra sign-in on App Service with its authentication on', () => {
    const env = { BATON_HTTP_AUTH: 'entra', WEBSITE_SITE_NAME: 'func-baton', WEBSITE_AUTH_ENABLED: 'True' };
    expect(parseBatonSettings(env).httpAuth).toBe('entra');
  });

  // Off App Service (Container Apps, Kubernetes, Docker, the local cluster) nothing strips a
  // client's own x-ms-client-principal, so `entra` would take any caller at its word.
  it.each<[string, Env, RegExp]>([
    [
      'on App Service with its authentication not said',
      { BATON_HTTP_AUTH: 'entra', WEBSITE_SITE_NAME: 'func-baton' },
      /^BATON_HTTP_AUTH=entra needs App Service authentication in front of the app, and it is off here/,
    ],
    [
      'on App Service with its authentication off',
      { BATON_HTTP_AUTH: 'entra', WEBSITE_SITE_NAME: 'func-baton', WEBSITE_AUTH_ENABLED: 'False' },
      /^BATON_HTTP_AUTH=entra needs App Service authentication in front of the app, and it is off here/,
    ],
    [
      'off App Service',
      { BATON_HTTP_AUTH: 'entra' },
      /^BATON_HTTP_AUTH=entra needs App Service authentication in front of the app, and this is not App Service \(WEBSITE_SITE_NAME is not set\)/,
    ],
    [
      'off App Service, with the authentication flag copied in',
      { BATON_HTTP_AUTH: 'entra', WEBSITE_AUTH_ENABLED: 'True' },
      /this is not App Service \(WEBSITE_SITE_NAME is not set\)/,
    ],
  ])('refuses Entra sign-in %s', (_name, env, error) => {
    expect(() => parseBatonSettings(env)).toThrow(error);
  });

  it('takes keys anywhere: nothing needs to stand in front', () => {
    expect(parseBatonSettings({ WEBSITE_SITE_NAME: 'func-baton' }).httpAuth).toBe('keys');
    expect(parseBatonSettings({}).httpAuth).toBe('keys');
  });

  it('defaults the leader priority to 0 and leaves the app version to the package', () => {
    expect(parseBatonSettings({})).toMatchObject({ leaderPriority: 0, appVersion: undefined });
  });

  it.each([15, 16, 17, 30, 44, 60])('defaults the renew deadline to what the elector defaults to, with a %i s lease', (lease) => {
    const settings = parseBatonSettings({ BATON_LEASE_SECONDS: String(lease) });
    const elector = resolveElectorOptions({ store: new InMemoryLeaseStore(), leaseDurationSeconds: lease });
    expect(settings.renewDeadlineMs).toBe(elector.renewDeadlineMs);
    expect(settings.renewDeadlineMs).toBe(Math.round((lease * 2000) / 3));
  });

  it.each<[number, number, number]>([
    [15, 7, 14],
    [16, 7, 15],
    [30, 13, 29],
    [60, 25, 59],
  ])('with a %i s lease, accepts renew deadlines from %i to %i s, as the elector does', (lease, lowest, highest) => {
    const accepts = (seconds: number) => {
      try {
        parseBatonSettings({ BATON_LEASE_SECONDS: String(lease), BATON_RENEW_DEADLINE_SECONDS: String(seconds) });
        return true;
      } catch (err) {
        expect(err).toBeInstanceOf(InvalidSettingError);
        return false;
      }
    };
    const electorAccepts = (seconds: number) => {
      try {
        resolveElectorOptions({ store: new InMemoryLeaseStore(), leaseDurationSeconds: lease, renewDeadlineMs: seconds * 1000 });
        return true;
      } catch {
        return false;
      }
    };
    const accepted = Array.from({ length: lease + 5 }, (_, i) => i).filter(accepts);
    expect(accepted[0]).toBe(lowest);
    expect(accepted.at(-1)).toBe(highest);
    expect(accepted).toHaveLength(highest - lowest + 1);
    for (let seconds = 1; seconds < lease + 5; seconds++) expect(accepts(seconds)).toBe(electorAccepts(seconds));
  });

  it.each<[Env, string]>([
    [{ BATON_RENEW_DEADLINE_SECONDS: '15' }, 'BATON_RENEW_DEADLINE_SECONDS must be less than BATON_LEASE_SECONDS (15)'],
    [
      { BATON_LEASE_SECONDS: '30', BATON_RENEW_DEADLINE_SECONDS: '45' },
      'BATON_RENEW_DEADLINE_SECONDS must be less than BATON_LEASE_SECONDS (30)',
    ],
    [
      { BATON_RENEW_DEADLINE_SECONDS: '6' },
      'BATON_RENEW_DEADLINE_SECONDS must be greater than 6: 1.2 × the renew interval, which is a third of BATON_LEASE_SECONDS (15), so a failed renewal can be retried in time',
    ],
    [
      { BATON_LEASE_SECONDS: '16', BATON_RENEW_DEADLINE_SECONDS: '6' },
      'BATON_RENEW_DEADLINE_SECONDS must be greater than 6.4: 1.2 × the renew interval, which is a third of BATON_LEASE_SECONDS (16), so a failed renewal can be retried in time',
    ],
    [
      { BATON_RENEW_DEADLINE_SECONDS: 'ten' },
      'BATON_RENEW_DEADLINE_SECONDS must be a whole number of seconds, less than BATON_LEASE_SECONDS',
    ],
    [
      { BATON_RENEW_DEADLINE_SECONDS: '7.5' },
      'BATON_RENEW_DEADLINE_SECONDS must be a whole number of seconds, less than BATON_LEASE_SECONDS',
    ],
    [
      { BATON_RENEW_DEADLINE_SECONDS: '-8' },
      'BATON_RENEW_DEADLINE_SECONDS must be a whole number of seconds, less than BATON_LEASE_SECONDS',
    ],
  ])('rejects the renew deadline in %j', (env, message) => {
    const err = settingError(() => parseBatonSettings(env));
    expect(err.setting).toBe('BATON_RENEW_DEADLINE_SECONDS');
    expect(err.message).toBe(message);
  });

  it.each<[string, string, string]>([
    ['BATON_HUB', 'Nightly', 'BATON_HUB must be 1-51 characters'],
    ['BATON_HUB', '-nightly', 'BATON_HUB must be 1-51 characters'],
    ['BATON_HUB', 'nightly-', 'BATON_HUB must be 1-51 characters'],
    ['BATON_HUB', 'night--ly', 'BATON_HUB must be 1-51 characters'],
    ['BATON_HUB', 'a'.repeat(52), 'BATON_HUB must be 1-51 characters'],
    ['BATON_HUB', 'job/one', 'BATON_HUB must be 1-51 characters'],
    ['BATON_COORDINATOR_SCHEDULE', 'every ten seconds', 'BATON_COORDINATOR_SCHEDULE must be an NCRONTAB expression'],
    ['BATON_TERM_SECONDS', '2', 'BATON_TERM_SECONDS must be at least 5'],
    ['BATON_MAX_ATTEMPTS', '0', 'BATON_MAX_ATTEMPTS must be at least 1'],
    ['BATON_MAX_ATTEMPTS', 'five', 'BATON_MAX_ATTEMPTS must be a whole number'],
    ['BATON_MAX_IN_FLIGHT', '8', 'BATON_MAX_IN_FLIGHT must be at least 16'],
    ['BATON_MAX_IN_FLIGHT', 'lots', 'BATON_MAX_IN_FLIGHT must be a whole number'],
    ['BATON_LEASE_SECONDS', '14', 'BATON_LEASE_SECONDS must be at least 15'],
    ['BATON_LEASE_SECONDS', '61', 'BATON_LEASE_SECONDS must be at most 60'],
    ['BATON_LEASE_SECONDS', '-1', 'BATON_LEASE_SECONDS must be a whole number of seconds from 15 to 60'],
    ['BATON_LEASE_SECONDS', '20.5', 'BATON_LEASE_SECONDS must be a whole number of seconds from 15 to 60'],
    ['BATON_LEASE_SECONDS', 'fifteen', 'BATON_LEASE_SECONDS must be a whole number of seconds from 15 to 60'],
    ['BATON_LEASE_CONTAINER', 'ab', 'BATON_LEASE_CONTAINER must be a container name of at least 3 characters'],
    ['BATON_LEASE_CONTAINER', 'a'.repeat(64), 'BATON_LEASE_CONTAINER must be a container name of at most 63 characters'],
    ['BATON_LEASE_CONTAINER', 'Leases', 'BATON_LEASE_CONTAINER must be a container name: lowercase'],
    ['BATON_LEASE_CONTAINER', 'my--leases', 'BATON_LEASE_CONTAINER must be a container name: lowercase'],
    ['BATON_LEASE_CONTAINER', 'leases-', 'BATON_LEASE_CONTAINER must be a container name: lowercase'],
  ])('rejects %s=%s', (setting, value, message) => {
    const err = settingError(() => parseBatonSettings({ [setting]: value }));
    expect(err.setting).toBe(setting);
    expect(err.message.startsWith(message)).toBe(true);
    expect(err.message).not.toContain(value);
  });

  it('reports the first bad setting in a fixed order', () => {
    const all = { BATON_HUB: 'BAD', BATON_LEASE_SECONDS: '5', BATON_LEASE_CONTAINER: 'x' };
    expect(settingError(() => parseBatonSettings(all)).setting).toBe('BATON_HUB');
    expect(settingError(() => parseBatonSettings({ ...all, BATON_HUB: 'ok' })).setting).toBe('BATON_LEASE_SECONDS');
    expect(settingError(() => parseBatonSettings({ ...all, BATON_HUB: 'ok', BATON_LEASE_SECONDS: '30' })).setting).toBe(
      'BATON_LEASE_CONTAINER',
    );
    // The deadline is checked against the lease, so it comes after it, and before the rest.
    const withDeadline = { ...all, BATON_HUB: 'ok', BATON_RENEW_DEADLINE_SECONDS: '60' };
    expect(settingError(() => parseBatonSettings(withDeadline)).setting).toBe('BATON_LEASE_SECONDS');
    expect(settingError(() => parseBatonSettings({ ...withDeadline, BATON_LEASE_SECONDS: '30' })).setting).toBe(
      'BATON_RENEW_DEADLINE_SECONDS',
    );
  });
});

describe('redactSecrets', () => {
  it.each<[string, string, string]>([
    ['account key', `AccountName=acct;AccountKey=${KEY};EndpointSuffix=x`, 'AccountName=acct;AccountKey=***;EndpointSuffix=x'],
    [
      'SAS setting',
      `BlobEndpoint=https://a/;SharedAccessSignature=${SAS};X=1`,
      'BlobEndpoint=https://a/;SharedAccessSignature=***;X=1',
    ],
    [
      'sig in a URL',
      'GET https://a.blob.core.windows.net/c/b?sv=1&sig=abc%2Bdef%3D&se=2 failed',
      'GET https://a.blob.core.windows.net/c/b?sv=1&sig=***&se=2 failed',
    ],
    ['sig first in a query', 'https://a/c?sig=abc&sv=1', 'https://a/c?sig=***&sv=1'],
    ['bearer token', 'token Bearer eyJhbGciOi.eyJzdWIi.sIgN rejected', 'token Bearer *** rejected'],
    ['authorization header', 'Authorization: SharedKey acct:c2lnbmF0dXJl\nnext', 'Authorization: ***\nnext'],
    [
      'authorization in JSON',
      '{"authorization":"Bearer abc.def","x-ms-version":"1"}',
      '{"authorization":"***","x-ms-version":"1"}',
    ],
    ['nothing secret', 'The specified blob does not exist. signature=fine', 'The specified blob does not exist. signature=fine'],
  ])('redacts %s', (_name, input, expected) => {
    expect(redactSecrets(input)).toBe(expected);
  });
});
