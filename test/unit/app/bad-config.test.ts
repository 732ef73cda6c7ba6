/**
 * Bad configuration: every setting the app reads, given invalid values, must stop start-up
 * with one line that names the setting and states the rule, and never repeats a value that
 * could be a secret. Each row goes through what the Functions entry point does at start-up
 * (functions/index.ts): `createJobs(env)`, then `createBatonRuntime(env, { jobs, hostQueueConfig })`.
 */
import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { createJobs } from '../../../functions/jobs';
import { createBatonRuntime } from '../../../src/app/runtime';
import { CliError, resolveConnection } from '../../../src/cli/connection';
import { InvalidSettingError } from '../../../src/errors';
import { readHostQueueConfig, type HostQueueConfig } from '../../../src/app/host-config';
import type { Env } from '../../../src/storage/setting';
import { oneLineError } from '../../support/errors';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '../../..');
/** Azurite's public development key: a well-formed key whose echo the tests look for. */
const KEY = 'Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==';
const SAS = 'sv=2022-11-02&ss=bq&srt=sco&sp=rwdlac&se=2030-01-01T00:00:00Z&sig=SeCrEtSiGnAtUrE%3D';
const BLOB = 'https://acct.blob.core.windows.net';
const QUEUE = 'https://acct.queue.core.windows.net';
/** A valid configuration; each row changes one thing. */
const BASE: Env = { AzureWebJobsStorage: `DefaultEndpointsProtocol=https;AccountName=acct;AccountKey=${KEY}` };
const HOST: HostQueueConfig = readHostQueueConfig(join(root, 'functions', 'host.json'));

/** What the app does at start-up with `env` and a host.json whose queue settings are `host`. */
function startUp(env: Env, host: Partial<HostQueueConfig> = {}): void {
  createBatonRuntime(env, { jobs: createJobs(env), hostQueueConfig: { ...HOST, ...host } });
}

interface Row {
  /** The setting the message must name (and `err.setting` must be). */
  setting: string;
  /** What is wrong, for the test name. */
  what: string;
  /** Replaces settings of BASE; `undefined` removes one. */
  env: Env;
  host?: Partial<HostQueueConfig>;
  /** The rule the message must state. */
  rule: RegExp;
  /** Text that must not appear in the message: the secret part of the bad value. */
  secret?: string;
}

const synthetic = (specs: unknown) => JSON.stringify(specs);

const rows: Row[] = [
  // --- storage: connection string ---------------------------------------------------------
  {
    setting: 'AzureWebJobsStorage',
    what: 'missing',
    env: { AzureWebJobsStorage: undefined },
    rule: /is not set: set a connection string, or AzureWebJobsStorage__blobServiceUri/,
  },
  { setting: 'AzureWebJobsStorage', what: 'blank', env: { AzureWebJobsStorage: '   ' }, rule: /is not set/ },
  {
    setting: 'AzureWebJobsStorage',
    what: 'a key that is not base64',
    env: { AzureWebJobsStorage: `AccountName=acct;AccountKey=${KEY.slice(0, -4)}!!!!` },
    rule: /is not a valid storage connection string: AccountKey is not base64/,
    secret: KEY.slice(0, 24),
  },
  {
    setting: 'AzureWebJobsStorage',
    what: 'a misspelled key name',
    env: { AzureWebJobsStorage: `AccountName=acct;Acountkey=${KEY}` },
    rule: /is not a valid storage connection string: part 2 has an unknown key/,
    secret: KEY.slice(0, 24),
  },
  {
    setting: 'AzureWebJobsStorage',
    what: 'key material where a key name goes',
    env: { AzureWebJobsStorage: `AccountName=acct;${KEY.slice(0, 40)}=x` },
    rule: /part 2 has an unknown key/,
    secret: KEY.slice(0, 24),
  },
  {
    setting: 'AzureWebJobsStorage',
    what: 'a part without =',
    env: { AzureWebJobsStorage: `AccountName=acct;${KEY.replace(/=/g, '')}` },
    rule: /part 2 is not a key=value pair/,
    secret: KEY.slice(0, 24),
  },
  {
    setting: 'AzureWebJobsStorage',
    what: 'a bad protocol',
    env: { AzureWebJobsStorage: `DefaultEndpointsProtocol=ftp;AccountName=acct;AccountKey=${KEY}` },
    rule: /DefaultEndpointsProtocol must be https or http/,
    secret: KEY.slice(0, 24),
  },
  {
    setting: 'AzureWebJobsStorage',
    what: 'a SAS without a queue endpoint',
    env: { AzureWebJobsStorage: `BlobEndpoint=${BLOB};SharedAccessSignature=${SAS}` },
    rule: /has no QueueEndpoint/,
    secret: 'SeCrEt',
  },
  {
    setting: 'AzureWebJobsStorage',
    what: 'no credentials',
    env: { AzureWebJobsStorage: 'AccountName=acct' },
    rule: /neither AccountName and AccountKey nor SharedAccessSignature/,
  },
  {
    setting: 'AzureWebJobsStorage',
    what: 'plain garbage',
    env: { AzureWebJobsStorage: 'hello' },
    rule: /part 1 is not a key=value pair/,
  },
  {
    setting: 'AzureWebJobsStorage',
    what: 'UseDevelopmentStorage=false',
    env: { AzureWebJobsStorage: 'UseDevelopmentStorage=false' },
    rule: /UseDevelopmentStorage must be true/,
  },
  // --- storage: identity parts -------------------------------------------------------------
  {
    setting: 'AzureWebJobsStorage__queueServiceUri',
    what: 'missing beside the blob URI',
    env: { AzureWebJobsStorage: undefined, AzureWebJobsStorage__blobServiceUri: BLOB },
    rule: /is not set: an identity-based connection needs it alongside AzureWebJobsStorage__blobServiceUri/,
  },
  {
    setting: 'AzureWebJobsStorage__blobServiceUri',
    what: 'missing beside the queue URI',
    env: { AzureWebJobsStorage: undefined, AzureWebJobsStorage__queueServiceUri: QUEUE },
    rule: /is not set: an identity-based connection needs it/,
  },
  {
    setting: 'AzureWebJobsStorage__blobServiceUri',
    what: 'http to a remote host',
    env: {
      AzureWebJobsStorage: undefined,
      AzureWebJobsStorage__blobServiceUri: 'http://acct.blob.core.windows.net',
      AzureWebJobsStorage__queueServiceUri: QUEUE,
    },
    rule: /must be an https URL \(http is allowed only for localhost/,
  },
  {
    setting: 'AzureWebJobsStorage__queueServiceUri',
    what: 'not a URL',
    env: {
      AzureWebJobsStorage: undefined,
      AzureWebJobsStorage__blobServiceUri: BLOB,
      AzureWebJobsStorage__queueServiceUri: 'acct.queue',
    },
    rule: /must be an https URL/,
  },
  {
    setting: 'AzureWebJobsStorage__accountName',
    what: 'capitals and an underscore',
    env: { AzureWebJobsStorage: undefined, AzureWebJobsStorage__accountName: 'My_Account' },
    rule: /must be a storage account name: 3-24 lowercase letters or digits/,
  },
  {
    setting: 'AzureWebJobsStorage__credential',
    what: 'a client secret',
    env: {
      AzureWebJobsStorage: undefined,
      AzureWebJobsStorage__accountName: 'acct',
      AzureWebJobsStorage__credential: 'clientsecret',
    },
    rule: /must be managedidentity \(or be left unset\)/,
  },
  {
    setting: 'AzureWebJobsStorage__clientId',
    what: 'not a GUID',
    env: {
      AzureWebJobsStorage: undefined,
      AzureWebJobsStorage__accountName: 'acct',
      AzureWebJobsStorage__clientId: 'not-a-guid',
    },
    rule: /must be a GUID/,
  },
  // --- Baton settings ----------------------------------------------------------------------
  {
    setting: 'BATON_HUB',
    what: 'capitals',
    env: { BATON_HUB: 'Nightly' },
    rule: /must be 1-51 characters of lowercase letters, digits and single inner hyphens/,
  },
  { setting: 'BATON_HUB', what: 'a double hyphen', env: { BATON_HUB: 'night--ly' }, rule: /must be 1-51 characters/ },
  { setting: 'BATON_HUB', what: '52 characters', env: { BATON_HUB: 'a'.repeat(52) }, rule: /must be 1-51 characters/ },
  { setting: 'BATON_LEASE_SECONDS', what: '10', env: { BATON_LEASE_SECONDS: '10' }, rule: /must be at least 15$/ },
  { setting: 'BATON_LEASE_SECONDS', what: '61', env: { BATON_LEASE_SECONDS: '61' }, rule: /must be at most 60$/ },
  {
    setting: 'BATON_LEASE_SECONDS',
    what: 'a word',
    env: { BATON_LEASE_SECONDS: 'fifteen' },
    rule: /must be a whole number of seconds from 15 to 60/,
  },
  {
    setting: 'BATON_LEASE_SECONDS',
    what: 'a fraction',
    env: { BATON_LEASE_SECONDS: '20.5' },
    rule: /must be a whole number of seconds from 15 to 60/,
  },
  {
    setting: 'BATON_LEASE_SECONDS',
    what: 'negative',
    env: { BATON_LEASE_SECONDS: '-20' },
    rule: /must be a whole number of seconds from 15 to 60/,
  },
  {
    setting: 'BATON_TAKEOVER_MS',
    what: 'not a number',
    env: { BATON_TAKEOVER_MS: '3s' },
    rule: /must be a whole number of milliseconds: 0 \(off\), or from 1000 to less than the renew deadline/,
  },
  {
    setting: 'BATON_TAKEOVER_MS',
    what: 'no shorter than the renew deadline',
    env: { BATON_TAKEOVER_MS: '10000' },
    rule: /must be 0 \(off\), or from 1000 to less than the renew deadline \(10000 ms\)/,
  },
  {
    setting: 'BATON_TAKEOVER_MS',
    what: 'shorter than a second',
    env: { BATON_TAKEOVER_MS: '500' },
    rule: /must be 0 \(off\), or from 1000 to less than the renew deadline/,
  },
  {
    setting: 'BATON_RENEW_DEADLINE_SECONDS',
    what: 'equal to the default lease',
    env: { BATON_RENEW_DEADLINE_SECONDS: '15' },
    rule: /must be less than BATON_LEASE_SECONDS \(15\)$/,
  },
  {
    setting: 'BATON_RENEW_DEADLINE_SECONDS',
    what: 'longer than the lease',
    env: { BATON_LEASE_SECONDS: '30', BATON_RENEW_DEADLINE_SECONDS: '31' },
    rule: /must be less than BATON_LEASE_SECONDS \(30\)$/,
  },
  {
    setting: 'BATON_RENEW_DEADLINE_SECONDS',
    what: 'too short to retry a renewal',
    env: { BATON_RENEW_DEADLINE_SECONDS: '6' },
    rule: /must be greater than 6: 1\.2 × the renew interval, which is a third of BATON_LEASE_SECONDS \(15\)/,
  },
  {
    setting: 'BATON_RENEW_DEADLINE_SECONDS',
    what: 'too short for a 60 s lease',
    env: { BATON_LEASE_SECONDS: '60', BATON_RENEW_DEADLINE_SECONDS: '24' },
    rule: /must be greater than 24: .*BATON_LEASE_SECONDS \(60\)/,
  },
  {
    setting: 'BATON_RENEW_DEADLINE_SECONDS',
    what: 'zero',
    env: { BATON_RENEW_DEADLINE_SECONDS: '0' },
    rule: /must be greater than 6/,
  },
  {
    setting: 'BATON_RENEW_DEADLINE_SECONDS',
    what: 'a fraction',
    env: { BATON_RENEW_DEADLINE_SECONDS: '7.5' },
    rule: /must be a whole number of seconds, less than BATON_LEASE_SECONDS/,
  },
  {
    setting: 'BATON_RENEW_DEADLINE_SECONDS',
    what: 'milliseconds by mistake',
    env: { BATON_RENEW_DEADLINE_SECONDS: '10000' },
    rule: /must be less than BATON_LEASE_SECONDS \(15\)/,
  },
  {
    setting: 'BATON_LEASE_CONTAINER',
    what: 'too short',
    env: { BATON_LEASE_CONTAINER: 'ab' },
    rule: /must be a container name of at least 3 characters/,
  },
  {
    setting: 'BATON_LEASE_CONTAINER',
    what: 'capitals',
    env: { BATON_LEASE_CONTAINER: 'Leases' },
    rule: /must be a container name: lowercase letters, digits and single hyphens/,
  },
  {
    setting: 'BATON_COORDINATOR_SCHEDULE',
    what: 'words',
    env: { BATON_COORDINATOR_SCHEDULE: 'every ten seconds' },
    rule: /must be an NCRONTAB expression such as/,
  },
  {
    setting: 'BATON_COORDINATOR_SCHEDULE',
    what: '4 fields',
    env: { BATON_COORDINATOR_SCHEDULE: '* * * *' },
    rule: /must be an NCRONTAB expression/,
  },
  {
    setting: 'BATON_COORDINATOR_SCHEDULE',
    what: 'minute 61',
    env: { BATON_COORDINATOR_SCHEDULE: '0 61 * * * *' },
    rule: /must be an NCRONTAB expression/,
  },
  {
    setting: 'BATON_COORDINATOR_SCHEDULE',
    what: 'a shortcut',
    env: { BATON_COORDINATOR_SCHEDULE: '@hourly' },
    rule: /must be an NCRONTAB expression/,
  },
  { setting: 'BATON_TERM_SECONDS', what: '2', env: { BATON_TERM_SECONDS: '2' }, rule: /must be at least 5$/ },
  { setting: 'BATON_REST_WHEN_IDLE', what: 'a word', env: { BATON_REST_WHEN_IDLE: 'yes' }, rule: /must be true or false$/ },
  { setting: 'BATON_TERM_SECONDS', what: 'over an hour', env: { BATON_TERM_SECONDS: '3601' }, rule: /must be at most 3600$/ },
  {
    setting: 'BATON_TERM_SECONDS',
    what: "as long as host.json's functionTimeout",
    env: { BATON_TERM_SECONDS: '600' },
    rule: /^BATON_TERM_SECONDS \(600\) must be less than host.json functionTimeout \(600 s\): a term runs inside one coordinator invocation/,
  },
  {
    setting: 'BATON_TERM_SECONDS',
    what: 'longer than a 90 s functionTimeout',
    env: { BATON_TERM_SECONDS: '120' },
    host: { functionTimeoutSeconds: 90 },
    rule: /^BATON_TERM_SECONDS \(120\) must be less than host.json functionTimeout \(90 s\)/,
  },
  {
    setting: 'BATON_TERM_SECONDS',
    what: 'a word',
    env: { BATON_TERM_SECONDS: 'sixty' },
    rule: /must be a whole number of seconds from 5 to 3600/,
  },
  { setting: 'BATON_MAX_ATTEMPTS', what: '0', env: { BATON_MAX_ATTEMPTS: '0' }, rule: /must be at least 1$/ },
  { setting: 'BATON_MAX_ATTEMPTS', what: '101', env: { BATON_MAX_ATTEMPTS: '101' }, rule: /must be at most 100$/ },
  {
    setting: 'BATON_MAX_ATTEMPTS',
    what: 'a word',
    env: { BATON_MAX_ATTEMPTS: 'five' },
    rule: /must be a whole number of attempts from 1 to 100/,
  },
  { setting: 'BATON_MAX_IN_FLIGHT', what: '8', env: { BATON_MAX_IN_FLIGHT: '8' }, rule: /must be at least 16$/ },
  {
    setting: 'BATON_MAX_IN_FLIGHT',
    what: 'over a million',
    env: { BATON_MAX_IN_FLIGHT: '1000001' },
    rule: /must be at most 1000000$/,
  },
  {
    setting: 'BATON_MAX_IN_FLIGHT',
    what: 'a word',
    env: { BATON_MAX_IN_FLIGHT: 'lots' },
    rule: /must be a whole number of messages from 16 to 1000000/,
  },
  { setting: 'BATON_RETENTION_DAYS', what: 'zero', env: { BATON_RETENTION_DAYS: '0' }, rule: /must be at least 1$/ },
  {
    setting: 'BATON_RETENTION_DAYS',
    what: 'over a century',
    env: { BATON_RETENTION_DAYS: '36501' },
    rule: /must be at most 36500$/,
  },
  {
    setting: 'BATON_RETENTION_DAYS',
    what: 'a duration',
    env: { BATON_RETENTION_DAYS: '30d' },
    rule: /must be a whole number of days from 1 to 36500/,
  },
  {
    setting: 'BATON_OUTPUT_RETENTION_DAYS',
    what: 'zero',
    env: { BATON_OUTPUT_RETENTION_DAYS: '0' },
    rule: /must be at least 1$/,
  },
  {
    setting: 'BATON_OUTPUT_RETENTION_DAYS',
    what: 'negative',
    env: { BATON_OUTPUT_RETENTION_DAYS: '-1' },
    rule: /must be a whole number of days from 1 to 36500/,
  },
  { setting: 'BATON_QUEUE_SHARDS', what: 'zero', env: { BATON_QUEUE_SHARDS: '0' }, rule: /must be at least 1$/ },
  { setting: 'BATON_QUEUE_SHARDS', what: 'seventeen', env: { BATON_QUEUE_SHARDS: '17' }, rule: /must be at most 16$/ },
  {
    setting: 'BATON_QUEUE_SHARDS',
    what: 'a word',
    env: { BATON_QUEUE_SHARDS: 'two' },
    rule: /must be a whole number of queues from 1 to 16/,
  },
  {
    setting: 'BATON_QUEUE_SHARDS',
    what: 'shards on the durable engine',
    env: { BATON_QUEUE_SHARDS: '2', BATON_ENGINE: 'durable' },
    rule: /applies to the queue engine only; with BATON_ENGINE=durable/,
  },
  {
    setting: 'BATON_QUEUE_SHARDS',
    what: 'a queue name too long for the hub',
    env: { BATON_QUEUE_SHARDS: '11', BATON_HUB: 'h'.repeat(48) },
    rule: new RegExp(
      `names the queue ${'h'.repeat(48)}-work-s10-poison, over Storage's 63 characters: use a BATON_HUB of at most 47 characters or fewer shards$`,
    ),
  },
  {
    setting: 'BATON_AUDIT_CONTAINER',
    what: 'an underscore',
    env: { BATON_AUDIT_CONTAINER: 'audit_demo' },
    rule: /must be a container name: lowercase letters/,
  },
  {
    setting: 'BATON_AUDIT_CONTAINER',
    what: 'too long',
    env: { BATON_AUDIT_CONTAINER: 'a'.repeat(64) },
    rule: /must be a container name of at most 63 characters/,
  },
  { setting: 'BATON_HTTP_AUTH', what: 'a word', env: { BATON_HTTP_AUTH: 'oauth' }, rule: /must be keys or entra$/ },
  {
    setting: 'BATON_HTTP_AUTH',
    what: 'Entra sign-in on App Service with its authentication off',
    env: { BATON_HTTP_AUTH: 'entra', WEBSITE_SITE_NAME: 'func-baton', WEBSITE_AUTH_ENABLED: 'False' },
    rule: /^BATON_HTTP_AUTH=entra needs App Service authentication in front of the app, and it is off here/,
  },
  {
    setting: 'BATON_HTTP_AUTH',
    what: 'Entra sign-in off App Service, where nothing vouches for the caller',
    env: { BATON_HTTP_AUTH: 'entra' },
    rule: /^BATON_HTTP_AUTH=entra needs App Service authentication in front of the app, and this is not App Service/,
  },
  { setting: 'BATON_SAMPLE_JOB', what: 'a word', env: { BATON_SAMPLE_JOB: 'yes' }, rule: /must be true or false$/ },
  { setting: 'BATON_LOG_LEVEL', what: 'a word', env: { BATON_LOG_LEVEL: 'verbose' }, rule: /must be info or debug$/ },
  {
    setting: 'BATON_LEADER_PRIORITY',
    what: 'a priority above 1000',
    env: { BATON_LEADER_PRIORITY: '1001' },
    rule: /must be a whole number from 0 to 1000$/,
  },
  {
    setting: 'BATON_LEADER_PRIORITY',
    what: 'a negative priority',
    env: { BATON_LEADER_PRIORITY: '-1' },
    rule: /must be a whole number from 0 to 1000$/,
  },
  {
    setting: 'BATON_APP_VERSION',
    what: 'a version that is not numbers',
    env: { BATON_APP_VERSION: 'latest' },
    rule: /^BATON_APP_VERSION must be a SemVer version such as 1\.4\.2, 2\.0\.0-rc\.1 or 1\.4\.2\+build\.7$/,
  },
  {
    setting: 'BATON_APP_VERSION',
    what: 'four numbers',
    env: { BATON_APP_VERSION: '1.2.3.4' },
    rule: /^BATON_APP_VERSION must be a SemVer version/,
  },
  {
    setting: 'BATON_METRICS_EXPORTER',
    what: 'an unknown exporter',
    env: { BATON_METRICS_EXPORTER: 'prometheus' },
    rule: /must be console, otlp or none$/,
  },
  {
    setting: 'BATON_HUB',
    what: 'a hub the Durable task hub cannot be named after',
    env: { BATON_ENGINE: 'durable', BATON_HUB: 'night-jobs' },
    rule: /must be 3-45 letters and digits starting with a letter \(no hyphens\)$/,
  },
  { setting: 'BATON_ENGINE', what: 'a word', env: { BATON_ENGINE: 'lambda' }, rule: /must be queue or durable$/ },
  // --- synthetic jobs ----------------------------------------------------------------------
  {
    setting: 'BATON_SYNTHETIC_JOBS',
    what: 'bad JSON',
    env: { BATON_SYNTHETIC_JOBS: '[{"name":"sum",' },
    rule: /must be a JSON array of job specs .*; it is not valid JSON/,
  },
  {
    setting: 'BATON_SYNTHETIC_JOBS',
    what: 'an object, not an array',
    env: { BATON_SYNTHETIC_JOBS: synthetic({ name: 'sum', items: 3 }) },
    rule: /is invalid: it must be a JSON array of job specs/,
  },
  {
    setting: 'BATON_SYNTHETIC_JOBS',
    what: 'an unparsable schedule',
    env: { BATON_SYNTHETIC_JOBS: synthetic([{ name: 'sum', items: 3, schedule: 'every day' }]) },
    rule: /^BATON_SYNTHETIC_JOBS\.0\.schedule .* is not a valid NCRONTAB expression: expected 6 fields/,
  },
  {
    setting: 'BATON_SYNTHETIC_JOBS',
    what: 'a schedule out of range',
    env: {
      BATON_SYNTHETIC_JOBS: synthetic([
        { name: 'a', items: 1 },
        { name: 'sum', items: 3, schedule: '0 0 25 * * *' },
      ]),
    },
    rule: /^BATON_SYNTHETIC_JOBS\.1\.schedule .* hour value 25 is out of range 0-23/,
  },
  {
    setting: 'BATON_SYNTHETIC_JOBS',
    what: 'a negative failureTolerance.count',
    env: { BATON_SYNTHETIC_JOBS: synthetic([{ name: 'sum', items: 3, failureTolerance: { count: -1 } }]) },
    rule: /is invalid at 0\.failureTolerance\.count \(job sum\): must be 0 or more/,
  },
  {
    setting: 'BATON_SYNTHETIC_JOBS',
    what: 'a negative failureTolerance.percent',
    env: { BATON_SYNTHETIC_JOBS: synthetic([{ name: 'sum', items: 3, failureTolerance: { percent: -5 } }]) },
    rule: /is invalid at 0\.failureTolerance\.percent \(job sum\): must be 0-100/,
  },
  {
    setting: 'BATON_SYNTHETIC_JOBS',
    what: 'failureTolerance.percent over 100',
    env: { BATON_SYNTHETIC_JOBS: synthetic([{ name: 'sum', items: 3, failureTolerance: { percent: 150 } }]) },
    rule: /failureTolerance\.percent \(job sum\): must be 0-100/,
  },
  {
    setting: 'BATON_SYNTHETIC_JOBS',
    what: 'an unknown failureTolerance key',
    env: { BATON_SYNTHETIC_JOBS: synthetic([{ name: 'sum', items: 3, failureTolerance: { ratio: 0.1 } }]) },
    rule: /is invalid at 0\.failureTolerance \(job sum\): Unrecognized key: "ratio"/,
  },
  {
    setting: 'BATON_SYNTHETIC_JOBS',
    what: 'negative items',
    env: { BATON_SYNTHETIC_JOBS: synthetic([{ name: 'sum', items: -1 }]) },
    rule: /is invalid at 0\.items \(job sum\): .*>=0/,
  },
  {
    setting: 'BATON_SYNTHETIC_JOBS',
    what: 'no items',
    env: { BATON_SYNTHETIC_JOBS: synthetic([{ name: 'sum' }]) },
    rule: /is invalid at 0\.items \(job sum\): .*expected number/,
  },
  {
    setting: 'BATON_SYNTHETIC_JOBS',
    what: 'a job name Baton refuses',
    env: { BATON_SYNTHETIC_JOBS: synthetic([{ name: 'Nightly Sum', items: 3 }]) },
    rule: /is invalid at 0: job Nightly Sum: name must be 1-48 lowercase letters, digits or inner hyphens/,
  },
  {
    setting: 'BATON_SYNTHETIC_JOBS',
    what: 'a job listed twice',
    env: {
      BATON_SYNTHETIC_JOBS: synthetic([
        { name: 'sum', items: 3 },
        { name: 'sum', items: 4 },
      ]),
    },
    rule: /is invalid at 1: job sum is listed twice; names must be unique/,
  },
  // --- host.json values the runtime checks -------------------------------------------------
  {
    setting: 'BATON_MAX_ATTEMPTS',
    what: 'different from host.json maxDequeueCount',
    env: {},
    host: { maxDequeueCount: 3 },
    rule: /^BATON_MAX_ATTEMPTS \(5\) must equal host\.json extensions\.queues\.maxDequeueCount \(3\)$/,
  },
  {
    setting: 'BATON_MAX_ATTEMPTS',
    what: 'set, and host.json left at its own',
    env: { BATON_MAX_ATTEMPTS: '7' },
    rule: /^BATON_MAX_ATTEMPTS \(7\) must equal host\.json extensions\.queues\.maxDequeueCount \(5\)$/,
  },
  {
    setting: 'host.json',
    what: 'base64 message encoding',
    env: {},
    host: { messageEncoding: 'base64' },
    rule: /^host\.json extensions\.queues\.messageEncoding must be "none": Baton sends plain JSON messages$/,
  },
];

describe('bad configuration stops start-up with one line naming the setting', () => {
  it('the base configuration starts, so each row fails for its own setting', () => {
    expect(() => startUp(BASE)).not.toThrow();
    expect(() => startUp({ ...BASE, BATON_SYNTHETIC_JOBS: synthetic([{ name: 'sum', items: 3 }]) })).not.toThrow();
    expect(() => startUp({ ...BASE, BATON_LEASE_SECONDS: '60', BATON_RENEW_DEADLINE_SECONDS: '59' })).not.toThrow();
  });

  it.each(rows.map((row) => [row.setting, row.what, row] as const))('%s: %s', (_setting, _what, row) => {
    const env: Env = { ...BASE };
    for (const [name, value] of Object.entries(row.env)) {
      if (value === undefined) delete env[name];
      else env[name] = value;
    }
    const err = oneLineError(InvalidSettingError, () => startUp(env, row.host));
    expect(err.code).toBe('InvalidSetting');
    expect(err.setting).toBe(row.setting);
    expect(err.message.startsWith(row.setting)).toBe(true);
    expect(err.message).toMatch(row.rule);
    if (row.secret) {
      expect(err.message).not.toContain(row.secret);
      expect(String(err.stack)).not.toContain(row.secret);
    }
  });

  it('every BATON_* and AzureWebJobsStorage setting read in src/ and functions/ has a row', () => {
    const read = new Set<string>();
    const walk = (dir: string): void => {
      for (const name of readdirSync(dir)) {
        const path = join(dir, name);
        if (statSync(path).isDirectory()) walk(path);
        else if (path.endsWith('.ts')) {
          for (const m of readFileSync(path, 'utf8').matchAll(/\b(BATON_[A-Z_]+|AzureWebJobsStorage(?:__[a-zA-Z]+)?)\b/g)) {
            read.add(m[1]!);
          }
        }
      }
    };
    walk(join(root, 'src'));
    walk(join(root, 'functions'));
    // Read only by the local cluster and its instance processes; test/integration/bad-config-exit.test.ts covers them.
    const instanceOnly = new Set([
      'BATON_INSTANCE',
      'BATON_HOST_JSON',
      'BATON_APP',
      'BATON_LOCAL_VISIBILITY_SECONDS',
      'BATON_LOCAL_FREEZE_TIMERS',
    ]);
    // Not settings: test-only switches, off unless set: src/fencing (1 turns fencing off), and
    // in src/local/instance-main.ts the chaos soak's dying worker (a trigger file) and its
    // report of the work messages a worker holds (1 turns it on).
    const notSettings = new Set(['BATON_UNSAFE_DISABLE_FENCING', 'BATON_CHAOS_DIE_AFTER_SENDING', 'BATON_CHAOS_REPORT_WORK']);
    const covered = new Set(rows.map((row) => row.setting));
    const missing = [...read].filter((name) => !covered.has(name) && !instanceOnly.has(name) && !notSettings.has(name));
    expect(missing).toEqual([]);
    expect(read.has('BATON_RENEW_DEADLINE_SECONDS')).toBe(true);
  });
});

describe("the CLI's settings: one line naming where the bad value came from", () => {
  const dirs: string[] = [];
  afterAll(() => {
    for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
  });
  const emptyDir = (): string => {
    const dir = mkdtempSync(join(tmpdir(), 'baton-bad-config-'));
    dirs.push(dir);
    return dir;
  };

  it.each<[string, { connection?: string; hub?: string; env?: Env; file?: Env | string }, RegExp, string | undefined]>([
    [
      'a malformed connection string in the environment',
      { env: { AzureWebJobsStorage: `AccountName=acct;AccountKey=${KEY.slice(0, -4)}!!!!` } },
      /^AzureWebJobsStorage is not a valid storage connection string: AccountKey is not base64 \(from the environment\)$/,
      KEY.slice(0, 24),
    ],
    [
      'a malformed --connection',
      { connection: `AccountName=acct;Acountkey=${KEY}` },
      /^--connection is not a valid storage connection string: part 2 has an unknown key/,
      KEY.slice(0, 24),
    ],
    ['an empty --connection', { connection: ' ' }, /^--connection is empty: pass a storage connection string$/, undefined],
    [
      'no connection anywhere',
      { env: {} },
      /^no storage connection: checked --connection, the AzureWebJobsStorage environment variable .* local\.settings\.json/,
      undefined,
    ],
    [
      'a malformed connection string in local.settings.json',
      { file: { AzureWebJobsStorage: `DefaultEndpointsProtocol=ftp;AccountName=acct;AccountKey=${KEY}` } },
      /^AzureWebJobsStorage is not a valid storage connection string: DefaultEndpointsProtocol must be https or http \(in local\.settings\.json\)$/,
      KEY.slice(0, 24),
    ],
    [
      'local.settings.json that is not JSON, with a key in it',
      { file: `{ "Values": { "AzureWebJobsStorage": "AccountKey=${KEY}" ` },
      /local\.settings\.json is not valid JSON; it must be an object such as \{"Values":\{"AzureWebJobsStorage":"UseDevelopmentStorage=true"\}\}$/,
      KEY.slice(0, 24),
    ],
    ['a bad --hub', { connection: 'UseDevelopmentStorage=true', hub: 'Nightly' }, /^--hub must be 1-51 characters/, undefined],
    [
      'a bad BATON_HUB',
      { env: { AzureWebJobsStorage: 'UseDevelopmentStorage=true', BATON_HUB: 'a_b' } },
      /^BATON_HUB must be 1-51 characters/,
      undefined,
    ],
    [
      'a bad BATON_LEASE_CONTAINER in local.settings.json',
      { file: { AzureWebJobsStorage: 'UseDevelopmentStorage=true', BATON_LEASE_CONTAINER: 'L' } },
      /^BATON_LEASE_CONTAINER must be a container name of at least 3 characters$/,
      undefined,
    ],
  ])('%s', (_name, input, rule, secret) => {
    const cwd = emptyDir();
    if (input.file !== undefined) {
      const text = typeof input.file === 'string' ? input.file : JSON.stringify({ IsEncrypted: false, Values: input.file });
      writeFileSync(join(cwd, 'local.settings.json'), text);
    }
    let error: unknown;
    try {
      resolveConnection({ connection: input.connection, hub: input.hub, env: input.env ?? {}, cwd });
    } catch (err) {
      error = err;
    }
    expect(error).toBeInstanceOf(CliError);
    const message = (error as CliError).message;
    expect(message).not.toMatch(/[\r\n]/);
    expect(message).toMatch(rule);
    // Every row that passes --connection or --hub has its bad value there: a usage error (2). A bad
    // value from the environment or local.settings.json is a failure (1): the command line was right.
    const fromFlag = input.connection !== undefined || input.hub !== undefined;
    expect((error as CliError).exitCode).toBe(fromFlag ? 2 : 1);
    if (secret) expect(message).not.toContain(secret);
  });
});

describe('the test-only fencing switch', () => {
  const base = { BATON_UNSAFE_DISABLE_FENCING: '1' };
  it('is refused against storage that is not the local emulator', () => {
    expect(() =>
      createBatonRuntime({
        ...base,
        AzureWebJobsStorage: `DefaultEndpointsProtocol=https;AccountName=prodacct;AccountKey=${Buffer.from('k'.repeat(32)).toString('base64')}`,
      }),
    ).toThrow(/^BATON_UNSAFE_DISABLE_FENCING is a test-only switch and is refused unless storage is the local emulator$/);
  });

  it('is allowed on the emulator, with a warning in the log', () => {
    const warnings: string[] = [];
    createBatonRuntime(
      { ...base, AzureWebJobsStorage: 'UseDevelopmentStorage=true' },
      { logger: { info: () => undefined, warn: (m) => warnings.push(m) } },
    );
    expect(warnings.join('\n')).toMatch(/fencing is OFF/);
  });
});
