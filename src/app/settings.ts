import * as z from '../zod';
import { isVersion } from '../lease/leader-rank';
import { InvalidSettingError } from '../errors.js';
import type { HttpAuth } from './http-auth.js';
import { defaultRenewDeadlineMs, defaultRenewIntervalMs, RENEW_JITTER_FACTOR } from '../lease/elector-options.js';
import { MAX_QUEUE_SHARDS, shardQueueNames } from '../hub/resources.js';
import { DEFAULT_RETENTION_DAYS, MAX_RETENTION_DAYS, type RetentionPolicy } from '../hub/retention.js';
import { Schedule } from '../schedule/schedule.js';
import { lazily, parseSetting, readSetting, settingOr, type Env } from '../storage/setting.js';

export interface BatonSettings {
  hub: string;
  leaseDurationSeconds: number;
  /**
   * How long after its last successful renewal a leader keeps trying before it gives up:
   * `BATON_RENEW_DEADLINE_SECONDS`, or two thirds of the lease (in ms, rounded as the elector does).
   */
  renewDeadlineMs: number;
  /**
   * Crash takeover (`BATON_TAKEOVER_MS`, default 3,000; 0 turns it off): how long a leader's
   * beats may stop before another instance breaks its lease (the elector's `breakAfterMs`).
   */
  takeoverMs: number | undefined;
  leaseContainer: string;
  /** NCRONTAB of the coordinator timer. */
  coordinatorSchedule: string;
  /** Longest a leader keeps the lease in one tick before handing it back. */
  termSeconds: number;
  /**
   * `BATON_REST_WHEN_IDLE` (default `true`): a leader with nothing open returns between
   * occurrences, and says in the lease when a leader is next needed, instead of holding an
   * invocation open for its whole term.
   */
  restWhenIdle: boolean;
  /** Deliveries of a work message before its failures are final; equals host.json maxDequeueCount. */
  maxAttempts: number;
  /** Most work messages of one run the leader lets be in flight (sent, not yet counted). */
  maxInFlightMessages: number;
  /** Which engine runs the jobs: Baton's queues (default) or Durable Functions orchestrations. */
  engine: 'queue' | 'durable';
  /** This instance's leader priority (`BATON_LEADER_PRIORITY`, 0–1000, default 0); ranks after the version. */
  leaderPriority: number;
  /** The app's version (`BATON_APP_VERSION`); unset, the runtime takes its package's version. */
  appVersion: string | undefined;
  /** Work and results queues the queue engine spreads a hub's messages over (`BATON_QUEUE_SHARDS`). */
  queueShards: number;
  /** Days runs (`BATON_RETENTION_DAYS`) and their outputs (`BATON_OUTPUT_RETENTION_DAYS`) are kept. */
  retention: RetentionPolicy;
  /** Who may call the HTTP API (`BATON_HTTP_AUTH`, default `keys`; `entra` behind App Service authentication). */
  httpAuth: HttpAuth;
}

// The hub names queues (`<hub>-work-poison`, at most 63 characters) and a container
// (`<hub>-runs`), so it follows their rules: no leading, trailing or double hyphens.
const hubSchema = lazily(() =>
  z.string().check(
    z.regex(/^(?=.{1,51}$)[a-z0-9]+(-[a-z0-9]+)*$/, {
      error: 'must be 1-51 characters of lowercase letters, digits and single inner hyphens (it names queues and a container)',
    }),
  ),
);
/** Digits only (`error` if not), read as a number. */
const digits = (error: string, pattern = /^\d+$/) => z.pipe(z.string().check(z.regex(pattern, { error })), z.transform(Number));
const wholeNumber = (min: number, max: number, what: string) =>
  z.pipe(
    digits(`must be a whole number of ${what} from ${min} to ${max}`),
    z.number().check(z.int(), z.gte(min, { error: `must be at least ${min}` }), z.lte(max, { error: `must be at most ${max}` })),
  );
/** Any case, checked against `values` in lower case. */
const lowerCaseOneOf = <const T extends readonly [string, ...string[]]>(values: T, error: string) =>
  z.pipe(
    z.pipe(
      z.string(),
      z.transform((v) => v.toLowerCase()),
    ),
    z.enum(values, { error }),
  );
const scheduleSchema = lazily(() =>
  z.string().check(
    z.refine(
      (value) => {
        try {
          Schedule.parse(value, 'BATON_COORDINATOR_SCHEDULE');
          return true;
        } catch {
          return false;
        }
      },
      { error: 'must be an NCRONTAB expression such as */10 * * * * *' },
    ),
  ),
);
const leaseSecondsSchema = lazily(() =>
  z.pipe(
    digits('must be a whole number of seconds from 15 to 60'),
    // Azure blob leases are 15-60 s (or infinite, which would never fail over).
    z.number().check(z.int(), z.gte(15, { error: 'must be at least 15' }), z.lte(60, { error: 'must be at most 60' })),
  ),
);
const containerSchema = lazily(() =>
  z.string().check(
    z.minLength(3, { error: 'must be a container name of at least 3 characters' }),
    z.maxLength(63, { error: 'must be a container name of at most 63 characters' }),
    z.regex(/^[a-z0-9]+(-[a-z0-9]+)*$/, {
      error: 'must be a container name: lowercase letters, digits and single hyphens, starting and ending with a letter or digit',
    }),
  ),
);

const renewDeadlineSchema = lazily(() => digits('must be a whole number of seconds, less than BATON_LEASE_SECONDS'));

/** The elector's two rules on the deadline, checked here so each is one line naming the setting. */
function parseRenewDeadlineMs(env: Env, leaseDurationSeconds: number): number {
  const name = 'BATON_RENEW_DEADLINE_SECONDS';
  const leaseMs = leaseDurationSeconds * 1000;
  const value = readSetting(env, name);
  if (value === undefined) return defaultRenewDeadlineMs(leaseMs);
  const deadlineMs = parseSetting(renewDeadlineSchema(), name, value) * 1000;
  if (deadlineMs >= leaseMs) {
    // Otherwise storage could give the lease away while this leader still believes it leads.
    throw new InvalidSettingError(name, `${name} must be less than BATON_LEASE_SECONDS (${leaseDurationSeconds})`);
  }
  const floorMs = RENEW_JITTER_FACTOR * defaultRenewIntervalMs(leaseMs);
  if (deadlineMs <= floorMs) {
    throw new InvalidSettingError(
      name,
      `${name} must be greater than ${Number((floorMs / 1000).toFixed(3))}: ${RENEW_JITTER_FACTOR} × the renew interval, ` +
        `which is a third of BATON_LEASE_SECONDS (${leaseDurationSeconds}), so a failed renewal can be retried in time`,
    );
  }
  return deadlineMs;
}

const takeoverSchema = lazily(() =>
  digits('must be a whole number of milliseconds: 0 (off), or from 1000 to less than the renew deadline'),
);

/** `BATON_TAKEOVER_MS`: off at 0; otherwise the elector's rule, as one line naming the setting. */
function parseTakeoverMs(env: Env, renewDeadlineMs: number): number | undefined {
  const name = 'BATON_TAKEOVER_MS';
  const ms = settingOr(env, name, takeoverSchema, DEFAULT_TAKEOVER_MS);
  if (ms === 0) return undefined;
  if (ms < 1000 || ms >= renewDeadlineMs) {
    throw new InvalidSettingError(
      name,
      `${name} must be 0 (off), or from 1000 to less than the renew deadline (${renewDeadlineMs} ms): a leader must be replaceable before it would give up on its own`,
    );
  }
  return ms;
}

const DEFAULT_TAKEOVER_MS = 3000;

/** Queue names are at most 63 characters; the longest a hub has is its last shard's poison queue. */
const MAX_QUEUE_NAME = 63;

/**
 * `BATON_QUEUE_SHARDS` (default 1). Checked against the hub and the engine here, so a value
 * that would name a queue Storage refuses, or that the durable engine would ignore, fails at
 * start-up with one line.
 */
function parseQueueShards(env: Env, hub: string, engine: BatonSettings['engine']): number {
  const name = 'BATON_QUEUE_SHARDS';
  const value = readSetting(env, name);
  if (value === undefined) return 1;
  const shards = parseSetting(wholeNumber(1, MAX_QUEUE_SHARDS, 'queues'), name, value);
  if (shards > 1 && engine === 'durable') {
    throw new InvalidSettingError(
      name,
      `${name} applies to the queue engine only; with BATON_ENGINE=durable the Durable Task extension's partitionCount in host.json spreads the load`,
    );
  }
  const longest = shardQueueNames(hub, shards - 1).poison;
  if (longest.length > MAX_QUEUE_NAME) {
    const room = MAX_QUEUE_NAME - (longest.length - hub.length);
    throw new InvalidSettingError(
      name,
      `${name} (${shards}) names the queue ${longest}, over Storage's ${MAX_QUEUE_NAME} characters: use a BATON_HUB of at most ${room} characters or fewer shards`,
    );
  }
  return shards;
}

/** A hub name as `BATON_HUB` takes it; a bad one throws `InvalidSettingError` naming `setting`. */
export function parseHubName(value: string, setting = 'BATON_HUB'): string {
  return parseSetting(hubSchema(), setting, value);
}

/**
 * host.json names the task hub `%BATON_HUB%`, and the Durable extension takes only 3-45 letters
 * and digits starting with a letter: otherwise the host itself fails to start, with the
 * extension's error and not one naming the setting.
 */
function checkTaskHubName(hub: string): void {
  if (!/^[A-Za-z][A-Za-z0-9]{2,44}$/.test(hub)) {
    throw new InvalidSettingError(
      'BATON_HUB',
      `BATON_HUB (${hub}) names the Durable task hub under BATON_ENGINE=durable, which must be 3-45 letters and digits starting with a letter (no hyphens)`,
    );
  }
}

/** `BATON_RETENTION_DAYS` (default 30) and `BATON_OUTPUT_RETENTION_DAYS` (default the same). */
function parseRetention(env: Env): RetentionPolicy {
  const days = lazily(() => wholeNumber(1, MAX_RETENTION_DAYS, 'days'));
  const runDays = settingOr(env, 'BATON_RETENTION_DAYS', days, DEFAULT_RETENTION_DAYS);
  const outputDays = settingOr(env, 'BATON_OUTPUT_RETENTION_DAYS', days, runDays);
  return { runDays, outputDays };
}

export function parseBatonSettings(env: Env = process.env): BatonSettings {
  // Parsed in a fixed order so several bad settings still produce one predictable error. Each
  // fallback is what its documented default reads as (settings.test.ts holds them equal).
  const hub = settingOr(env, 'BATON_HUB', hubSchema, 'baton');
  const leaseDurationSeconds = settingOr(env, 'BATON_LEASE_SECONDS', leaseSecondsSchema, 15);
  const renewDeadlineMs = parseRenewDeadlineMs(env, leaseDurationSeconds);
  const settings = {
    hub,
    leaseDurationSeconds,
    renewDeadlineMs,
    takeoverMs: parseTakeoverMs(env, renewDeadlineMs),
    leaseContainer: settingOr(env, 'BATON_LEASE_CONTAINER', containerSchema, 'leases'),
    coordinatorSchedule: settingOr(env, 'BATON_COORDINATOR_SCHEDULE', scheduleSchema, '*/10 * * * * *'),
    termSeconds: settingOr(env, 'BATON_TERM_SECONDS', () => wholeNumber(5, 3600, 'seconds'), 60),
    restWhenIdle: settingOr(
      env,
      'BATON_REST_WHEN_IDLE',
      () =>
        z.pipe(
          lowerCaseOneOf(['true', 'false'], 'must be true or false'),
          z.transform((v) => v === 'true'),
        ),
      true,
    ),
    maxAttempts: settingOr(env, 'BATON_MAX_ATTEMPTS', () => wholeNumber(1, 100, 'attempts'), 5),
    maxInFlightMessages: settingOr(env, 'BATON_MAX_IN_FLIGHT', () => wholeNumber(16, 1_000_000, 'messages'), 4096),
    engine: settingOr<BatonSettings['engine']>(
      env,
      'BATON_ENGINE',
      () => z.enum(['queue', 'durable'], { error: 'must be queue or durable' }),
      'queue',
    ),
    leaderPriority: settingOr(
      env,
      'BATON_LEADER_PRIORITY',
      () =>
        z.pipe(
          digits('must be a whole number from 0 to 1000', /^\d{1,4}$/),
          z.number().check(z.lte(1000, { error: 'must be a whole number from 0 to 1000' })),
        ),
      0,
    ),
    appVersion: settingOr<string | undefined>(
      env,
      'BATON_APP_VERSION',
      () =>
        z.string().check(z.refine(isVersion, { error: 'must be a SemVer version such as 1.4.2, 2.0.0-rc.1 or 1.4.2+build.7' })),
      undefined,
    ),
  };
  if (settings.engine === 'durable') checkTaskHubName(hub);
  return {
    ...settings,
    queueShards: parseQueueShards(env, hub, settings.engine),
    retention: parseRetention(env),
    httpAuth: parseHttpAuth(env),
  };
}

/**
 * `BATON_HTTP_AUTH`. Under `entra` the host checks no key and Baton trusts the caller App Service
 * authentication vouches for, so the app refuses to start wherever nothing vouches: on App
 * Service (WEBSITE_SITE_NAME set) with that authentication off (WEBSITE_AUTH_ENABLED not True),
 * and anywhere else (Container Apps, Kubernetes, Docker, the local cluster), where nothing drops
 * an `x-ms-client-principal` header the client wrote itself.
 */
function parseHttpAuth(env: Env): HttpAuth {
  const name = 'BATON_HTTP_AUTH';
  const auth = settingOr<HttpAuth>(env, name, () => lowerCaseOneOf(['keys', 'entra'], 'must be keys or entra'), 'keys');
  if (auth === 'entra') {
    if (readSetting(env, 'WEBSITE_SITE_NAME') === undefined) {
      throw new InvalidSettingError(
        name,
        `${name}=entra needs App Service authentication in front of the app, and this is not App Service (WEBSITE_SITE_NAME is not set): anyone could send the signed-in caller's header; set ${name}=keys`,
      );
    }
    if ((readSetting(env, 'WEBSITE_AUTH_ENABLED') ?? '').toLowerCase() !== 'true') {
      throw new InvalidSettingError(
        name,
        `${name}=entra needs App Service authentication in front of the app, and it is off here (WEBSITE_AUTH_ENABLED is not True): turn it on (the deploy's Entra option) or set ${name}=keys`,
      );
    }
  }
  return auth;
}

export type LogLevel = 'info' | 'debug';

const logLevelSchema = lazily(() => lowerCaseOneOf(['info', 'debug'], 'must be info or debug'));

/**
 * `BATON_LOG_LEVEL` (default `info`). `debug` adds the elector's per-renewal lines and the
 * timer's per-tick lines, and makes the local cluster print every instance's log lines.
 */
export function parseLogLevel(env: Env = process.env): LogLevel {
  return settingOr<LogLevel>(env, 'BATON_LOG_LEVEL', logLevelSchema, 'info');
}

export type MetricsExporter = 'console' | 'otlp' | 'none';

const metricsExporterSchema = lazily(() => lowerCaseOneOf(['console', 'otlp', 'none'], 'must be console, otlp or none'));

/**
 * `BATON_METRICS_EXPORTER` (default `none`): where metrics and events go when Application
 * Insights does not take them (no `APPLICATIONINSIGHTS_CONNECTION_STRING`). `console` prints
 * them, one line each; `otlp` sends them over OTLP/HTTP to the endpoint of the standard
 * `OTEL_EXPORTER_OTLP_*` settings (default http://localhost:4318).
 */
export function parseMetricsExporter(env: Env = process.env): MetricsExporter {
  return settingOr<MetricsExporter>(env, 'BATON_METRICS_EXPORTER', metricsExporterSchema, 'none');
}

/**
 * `OTEL_METRIC_EXPORT_INTERVAL` (OpenTelemetry's own setting, in ms; default 60000): how often
 * metrics are exported. Azure Monitor reads it too; checked here so a typo fails at start-up.
 */
export function parseMetricExportIntervalMs(env: Env = process.env): number {
  return settingOr(env, 'OTEL_METRIC_EXPORT_INTERVAL', () => wholeNumber(1000, 86_400_000, 'milliseconds'), 60_000);
}
