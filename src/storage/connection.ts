import * as z from '../zod';
import { InvalidSettingError } from '../errors.js';
import { lazily, parseSetting, readSetting } from './setting.js';

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

// Built only for an identity-based connection's settings (see `lazily`).
const serviceUriSchema = lazily(() =>
  z.string().check(
    z.refine(
      (value) => {
        try {
          const url = new URL(value);
          return url.protocol === 'https:' || (url.protocol === 'http:' && LOCAL_HOSTS.has(url.hostname));
        } catch {
          return false;
        }
      },
      { error: 'must be an https URL (http is allowed only for localhost or 127.0.0.1)' },
    ),
  ),
);
const accountNameSchema = lazily(() =>
  z.string().check(z.regex(/^[a-z0-9]{3,24}$/, { error: 'must be a storage account name: 3-24 lowercase letters or digits' })),
);
const credentialSchema = lazily(() =>
  z.pipe(
    z.pipe(
      z.string(),
      z.transform((v) => v.toLowerCase()),
    ),
    z.literal('managedidentity', { error: 'must be managedidentity (or be left unset)' }),
  ),
);
const clientIdSchema = lazily(() => z.guid({ error: 'must be a GUID (the client ID of a user-assigned identity)' }));

export function parseStorageSettings(
  env: Record<string, string | undefined> = process.env,
  options: { prefix?: string } = {},
): StorageSettings {
  const prefix = options.prefix ?? 'AzureWebJobsStorage';

  const connectionString = readSetting(env, prefix);
  if (connectionString !== undefined) {
    const result = normalizeConnectionString(connectionString);
    if ('problem' in result) {
      throw new InvalidSettingError(prefix, `${prefix} is not a valid storage connection string: ${result.problem}`);
    }
    return { kind: 'connectionString', connectionString: result.ok };
  }

  const name = (suffix: string) => `${prefix}__${suffix}`;
  const optional = <T extends z.ZodMiniType>(schema: () => T, setting: string): z.output<T> | undefined => {
    const value = readSetting(env, setting);
    return value === undefined ? undefined : parseSetting(schema(), setting, value);
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
