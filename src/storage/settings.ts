import { z } from 'zod';
import { InvalidSettingError } from '../errors.js';
import { defaultRenewDeadlineMs, defaultRenewIntervalMs, RENEW_JITTER_FACTOR } from '../lease/elector-options.js';
import { Schedule } from '../schedule/schedule.js';

export type Env = Record<string, string | undefined>;

/**
 * Where storage is and how to authenticate. `connectionString` is a normalized copy of the
 * setting (canonical key names, explicit blob and queue endpoints) so the SDK's strict,
 * case-sensitive parser accepts every form the Functions host accepts.
 */
export type StorageSettings =
  | { kind: 'connectionString'; connectionString: string }
  | {
      kind: 'identity';
      blobServiceUri: string;
      queueServiceUri: string;
      credential?: 'managedidentity';
      clientId?: string;
    };

export interface BatonSettings {
  hub: string;
  leaseDurationSeconds: number;
  /**
   * How long after its last successful renewal a leader keeps trying before it gives up:
   * `BATON_RENEW_DEADLINE_SECONDS`, or two thirds of the lease (in ms, rounded as the elector does).
   */
  renewDeadlineMs: number;
  leaseContainer: string;
  /** NCRONTAB of the coordinator timer. */
  coordinatorSchedule: string;
  /** Longest a leader keeps the lease in one tick before handing it back. */
  termSeconds: number;
  /** Deliveries of a work message before its failures are final; equals host.json maxDequeueCount. */
  maxAttempts: number;
  /** Most work messages of one run the leader lets be in flight (sent, not yet counted). */
  maxInFlightMessages: number;
  /** The container the sample blob-audit job scrubs. */
  auditContainer: string;
  /** Which engine runs the jobs: Baton's queues (default) or Durable Functions orchestrations. */
  engine: 'queue' | 'durable';
}

// App settings left blank in the portal arrive as empty strings; treat them as unset.
function read(env: Env, name: string): string | undefined {
  const value = env[name]?.trim();
  return value ? value : undefined;
}

/** Parses one setting; the first issue becomes a one-line error that never echoes the value. */
function parseSetting<T extends z.ZodType>(schema: T, name: string, value: unknown): z.output<T> {
  const result = schema.safeParse(value);
  if (result.success) return result.data;
  const detail = result.error.issues[0]?.message ?? 'is invalid';
  throw new InvalidSettingError(name, `${name} ${detail}`.replace(/\s+/g, ' '));
}

// --- connection strings ------------------------------------------------------------------

const CONNECTION_KEYS = [
  'DefaultEndpointsProtocol',
  'AccountName',
  'AccountKey',
  'SharedAccessSignature',
  'EndpointSuffix',
  'BlobEndpoint',
  'QueueEndpoint',
  'TableEndpoint',
  'FileEndpoint',
  'UseDevelopmentStorage',
  'DevelopmentStorageProxyUri',
] as const;
type ConnectionKey = (typeof CONNECTION_KEYS)[number];

function isHttpUrl(value: string): boolean {
  try {
    const url = new URL(value);
    return url.protocol === 'https:' || url.protocol === 'http:';
  } catch {
    return false;
  }
}

/** Returns the normalized connection string, or a reason that names a part but not its value. */
function normalizeConnectionString(raw: string): { ok: string } | { problem: string } {
  const parts = new Map<ConnectionKey, string>();
  const segments = raw
    .split(';')
    .map((s) => s.trim())
    .filter(Boolean);
  for (const [i, segment] of segments.entries()) {
    const eq = segment.indexOf('=');
    if (eq <= 0) return { problem: `part ${i + 1} is not a key=value pair` };
    const name = segment.slice(0, eq).trim().toLowerCase();
    const key = CONNECTION_KEYS.find((k) => k.toLowerCase() === name);
    // Unknown keys are not quoted: a mangled string can put key material in the key position.
    if (!key) return { problem: `part ${i + 1} has an unknown key (expected ${CONNECTION_KEYS.join(', ')})` };
    if (parts.has(key)) return { problem: `${key} appears more than once` };
    const value = segment.slice(eq + 1).trim();
    if (!value) return { problem: `${key} is empty` };
    parts.set(key, value);
  }

  const dev = parts.get('UseDevelopmentStorage');
  if (dev !== undefined) {
    if (dev.toLowerCase() !== 'true') return { problem: 'UseDevelopmentStorage must be true' };
    const other = [...parts.keys()].find((k) => k !== 'UseDevelopmentStorage' && k !== 'DevelopmentStorageProxyUri');
    if (other) return { problem: `UseDevelopmentStorage=true cannot be combined with ${other}` };
    // The SDK only recognizes this exact prefix, so emit it verbatim.
    const proxy = parts.get('DevelopmentStorageProxyUri');
    return { ok: `UseDevelopmentStorage=true${proxy ? `;DevelopmentStorageProxyUri=${proxy}` : ''}` };
  }

  const protocol = (parts.get('DefaultEndpointsProtocol') ?? 'https').toLowerCase();
  if (protocol !== 'https' && protocol !== 'http') return { problem: 'DefaultEndpointsProtocol must be https or http' };
  for (const key of ['BlobEndpoint', 'QueueEndpoint', 'TableEndpoint', 'FileEndpoint'] as const) {
    const value = parts.get(key);
    if (value !== undefined && !isHttpUrl(value)) return { problem: `${key} is not an http(s) URL` };
  }

  const accountName = parts.get('AccountName');
  const accountKey = parts.get('AccountKey');
  const sas = parts.get('SharedAccessSignature');
  if (accountKey !== undefined) {
    if (!accountName) return { problem: 'AccountKey needs AccountName' };
    if (!/^[A-Za-z0-9+/]+={0,2}$/.test(accountKey) || accountKey.length % 4 !== 0) {
      return { problem: 'AccountKey is not base64' };
    }
  } else if (sas === undefined) {
    return { problem: 'it has neither AccountName and AccountKey nor SharedAccessSignature' };
  }

  // The SDK derives endpoints only for account-key strings and only with EndpointSuffix set;
  // the Functions host defaults both, so derive them here and always pass explicit endpoints.
  const suffix = parts.get('EndpointSuffix') ?? 'core.windows.net';
  const endpoint = (key: 'BlobEndpoint' | 'QueueEndpoint', service: string) =>
    parts.get(key) ?? (accountName ? `${protocol}://${accountName}.${service}.${suffix}` : undefined);
  const blob = endpoint('BlobEndpoint', 'blob');
  const queue = endpoint('QueueEndpoint', 'queue');
  if (!blob) return { problem: 'it has no BlobEndpoint and no AccountName to derive it from' };
  if (!queue) return { problem: 'it has no QueueEndpoint and no AccountName to derive it from' };

  const out: string[] = [];
  // The SDK takes the account-key path only when DefaultEndpointsProtocol is present.
  if (accountKey !== undefined) out.push(`DefaultEndpointsProtocol=${protocol}`);
  if (accountName) out.push(`AccountName=${accountName}`);
  if (accountKey !== undefined) out.push(`AccountKey=${accountKey}`);
  if (sas !== undefined) out.push(`SharedAccessSignature=${sas}`);
  out.push(`BlobEndpoint=${blob}`, `QueueEndpoint=${queue}`);
  return { ok: out.join(';') };
}

// --- identity-based connections ----------------------------------------------------------

const LOCAL_HOSTS = new Set(['localhost', '127.0.0.1', '[::1]']);

const serviceUriSchema = z.string().refine(
  (value) => {
    try {
      const url = new URL(value);
      return url.protocol === 'https:' || (url.protocol === 'http:' && LOCAL_HOSTS.has(url.hostname));
    } catch {
      return false;
    }
  },
  { error: 'must be an https URL (http is allowed only for localhost or 127.0.0.1)' },
);
const accountNameSchema = z
  .string()
  .regex(/^[a-z0-9]{3,24}$/, { error: 'must be a storage account name: 3-24 lowercase letters or digits' });
const credentialSchema = z
  .string()
  .transform((v) => v.toLowerCase())
  .pipe(z.literal('managedidentity', { error: 'must be managedidentity (or be left unset)' }));
const clientIdSchema = z.guid({ error: 'must be a GUID (the client ID of a user-assigned identity)' });

export function parseStorageSettings(env: Env = process.env, options: { prefix?: string } = {}): StorageSettings {
  const prefix = options.prefix ?? 'AzureWebJobsStorage';

  const connectionString = read(env, prefix);
  if (connectionString !== undefined) {
    const result = normalizeConnectionString(connectionString);
    if ('problem' in result) {
      throw new InvalidSettingError(prefix, `${prefix} is not a valid storage connection string: ${result.problem}`);
    }
    return { kind: 'connectionString', connectionString: result.ok };
  }

  const name = (suffix: string) => `${prefix}__${suffix}`;
  const optional = <T extends z.ZodType>(schema: T, setting: string): z.output<T> | undefined => {
    const value = read(env, setting);
    return value === undefined ? undefined : parseSetting(schema, setting, value);
  };
  const blobUri = optional(serviceUriSchema, name('blobServiceUri'));
  const queueUri = optional(serviceUriSchema, name('queueServiceUri'));
  const accountName = optional(accountNameSchema, name('accountName'));

  if (blobUri === undefined && queueUri === undefined && accountName === undefined) {
    throw new InvalidSettingError(
      prefix,
      `${prefix} is not set: set a connection string, or ${name('blobServiceUri')} and __queueServiceUri ` +
        '(or __accountName) for an identity-based connection',
    );
  }
  const blobServiceUri = blobUri ?? (accountName && `https://${accountName}.blob.core.windows.net`);
  const queueServiceUri = queueUri ?? (accountName && `https://${accountName}.queue.core.windows.net`);
  for (const [missing, present, value] of [
    [name('blobServiceUri'), name('queueServiceUri'), blobServiceUri],
    [name('queueServiceUri'), name('blobServiceUri'), queueServiceUri],
  ] as const) {
    if (!value) {
      throw new InvalidSettingError(
        missing,
        `${missing} is not set: an identity-based connection needs it alongside ${present} (or set ${name('accountName')})`,
      );
    }
  }

  const credential = optional(credentialSchema, name('credential'));
  const clientId = optional(clientIdSchema, name('clientId'));
  return {
    kind: 'identity',
    blobServiceUri: blobServiceUri as string,
    queueServiceUri: queueServiceUri as string,
    ...(credential ? { credential } : {}),
    ...(clientId ? { clientId } : {}),
  };
}

// --- Baton settings ----------------------------------------------------------------------

// The hub names queues (`<hub>-work-poison`, at most 63 characters) and a container
// (`<hub>-runs`), so it follows their rules: no leading, trailing or double hyphens.
const hubSchema = z.string().regex(/^(?=.{1,51}$)[a-z0-9]+(-[a-z0-9]+)*$/, {
  error: 'must be 1-51 characters of lowercase letters, digits and single inner hyphens (it names queues and a container)',
});
const wholeNumber = (min: number, max: number, what: string) =>
  z
    .string()
    .regex(/^\d+$/, { error: `must be a whole number of ${what} from ${min} to ${max}` })
    .transform(Number)
    .pipe(
      z
        .number()
        .int()
        .min(min, { error: `must be at least ${min}` })
        .max(max, { error: `must be at most ${max}` }),
    );
const scheduleSchema = z.string().refine(
  (value) => {
    try {
      Schedule.parse(value, 'BATON_COORDINATOR_SCHEDULE');
      return true;
    } catch {
      return false;
    }
  },
  { error: 'must be an NCRONTAB expression such as */10 * * * * *' },
);
const leaseSecondsSchema = z
  .string()
  .regex(/^\d+$/, { error: 'must be a whole number of seconds from 15 to 60' })
  .transform(Number)
  // Azure blob leases are 15-60 s (or infinite, which would never fail over).
  .pipe(z.number().int().min(15, { error: 'must be at least 15' }).max(60, { error: 'must be at most 60' }));
const containerSchema = z
  .string()
  .min(3, { error: 'must be a container name of at least 3 characters' })
  .max(63, { error: 'must be a container name of at most 63 characters' })
  .regex(/^[a-z0-9]+(-[a-z0-9]+)*$/, {
    error: 'must be a container name: lowercase letters, digits and single hyphens, starting and ending with a letter or digit',
  });

const renewDeadlineSchema = z
  .string()
  .regex(/^\d+$/, { error: 'must be a whole number of seconds, less than BATON_LEASE_SECONDS' })
  .transform(Number);

/** The elector's two rules on the deadline, checked here so each is one line naming the setting. */
function parseRenewDeadlineMs(env: Env, leaseDurationSeconds: number): number {
  const name = 'BATON_RENEW_DEADLINE_SECONDS';
  const leaseMs = leaseDurationSeconds * 1000;
  const value = read(env, name);
  if (value === undefined) return defaultRenewDeadlineMs(leaseMs);
  const deadlineMs = parseSetting(renewDeadlineSchema, name, value) * 1000;
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

export function parseBatonSettings(env: Env = process.env): BatonSettings {
  // Parsed in a fixed order so several bad settings still produce one predictable error.
  const hub = parseSetting(hubSchema, 'BATON_HUB', read(env, 'BATON_HUB') ?? 'baton');
  const leaseDurationSeconds = parseSetting(leaseSecondsSchema, 'BATON_LEASE_SECONDS', read(env, 'BATON_LEASE_SECONDS') ?? '15');
  return {
    hub,
    leaseDurationSeconds,
    renewDeadlineMs: parseRenewDeadlineMs(env, leaseDurationSeconds),
    leaseContainer: parseSetting(containerSchema, 'BATON_LEASE_CONTAINER', read(env, 'BATON_LEASE_CONTAINER') ?? 'leases'),
    coordinatorSchedule: parseSetting(
      scheduleSchema,
      'BATON_COORDINATOR_SCHEDULE',
      read(env, 'BATON_COORDINATOR_SCHEDULE') ?? '*/10 * * * * *',
    ),
    termSeconds: parseSetting(wholeNumber(5, 3600, 'seconds'), 'BATON_TERM_SECONDS', read(env, 'BATON_TERM_SECONDS') ?? '60'),
    maxAttempts: parseSetting(wholeNumber(1, 100, 'attempts'), 'BATON_MAX_ATTEMPTS', read(env, 'BATON_MAX_ATTEMPTS') ?? '5'),
    maxInFlightMessages: parseSetting(
      wholeNumber(16, 1_000_000, 'messages'),
      'BATON_MAX_IN_FLIGHT',
      read(env, 'BATON_MAX_IN_FLIGHT') ?? '4096',
    ),
    auditContainer: parseSetting(containerSchema, 'BATON_AUDIT_CONTAINER', read(env, 'BATON_AUDIT_CONTAINER') ?? 'audit-demo'),
    engine: parseSetting(
      z.enum(['queue', 'durable'], { error: 'must be queue or durable' }),
      'BATON_ENGINE',
      read(env, 'BATON_ENGINE') ?? 'queue',
    ),
  };
}

// --- log level ---------------------------------------------------------------------------

export type LogLevel = 'info' | 'debug';

const logLevelSchema = z
  .string()
  .transform((v) => v.toLowerCase())
  .pipe(z.enum(['info', 'debug'], { error: 'must be info or debug' }));

/**
 * `BATON_LOG_LEVEL` (default `info`). `debug` adds the elector's per-renewal lines and the
 * timer's per-tick lines, and makes the local cluster print every instance's log lines.
 */
export function parseLogLevel(env: Env = process.env): LogLevel {
  return parseSetting(logLevelSchema, 'BATON_LOG_LEVEL', read(env, 'BATON_LOG_LEVEL') ?? 'info');
}

// --- redaction ---------------------------------------------------------------------------

/** Masks key material that SDK errors and URLs can carry, so they are safe to log. */
export function redactSecrets(text: string): string {
  return text
    .replace(/(AccountKey\s*=\s*)[^;\s"'&]+/gi, '$1***')
    .replace(/(SharedAccessSignature\s*=\s*)[^;\s"']+/gi, '$1***')
    .replace(/([?&;\s"']sig(?:=|%3D))[^&;\s"']+/gi, '$1***')
    .replace(/^(sig(?:=|%3D))[^&;\s"']+/i, '$1***')
    .replace(/(authorization["']?\s*[:=]\s*["']?)[^"'\r\n,}]+/gi, '$1***')
    .replace(/\b(Bearer|SharedKey)\s+[A-Za-z0-9\-._~+/:=]+/g, '$1 ***');
}
