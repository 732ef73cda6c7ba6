import type { TokenCredential } from '@azure/identity';
import { BlobServiceClient, newPipeline as newBlobPipeline, type StorageRetryOptions } from '@azure/storage-blob';
import { newPipeline as newQueuePipeline, QueueServiceClient } from '@azure/storage-queue';
import type { StorageTimeClock } from '../clock/storage-time-clock.js';
import type { StorageRequestCounter } from './request-counter.js';
import type { StorageSettings } from './connection.js';
import { storageTimePolicyFactory } from './storage-time-policy.js';

export interface StorageClientOptions {
  retryOptions?: StorageRetryOptions;
  /** Replaces the credential built from settings (identity connections only); for tests. */
  credential?: TokenCredential;
  /** Counts every request these clients send, by operation. */
  requestCounter?: StorageRequestCounter;
  /** Learns storage's time from the `Date` header of every answer these clients receive. */
  storageTime?: StorageTimeClock;
}

/**
 * For lease calls: one try of at most 10 s. The elector retries lease calls itself against its
 * renew deadline and bounds each by the time left; the SDK default (4 tries with backoff from a
 * 4 s base) can outlive a 15 s lease, and a call without a signal must still end.
 */
export const LEASE_RETRY_OPTIONS: StorageRetryOptions = { maxTries: 1, tryTimeoutInMs: 10_000 };

// `credential` mirrors the Functions host: `managedidentity` pins ManagedIdentityCredential,
// otherwise DefaultAzureCredential lets the same settings work locally (Azure CLI, VS Code).
function credentialFor(settings: Extract<StorageSettings, { kind: 'identity' }>, options: StorageClientOptions): TokenCredential {
  if (options.credential) return options.credential;
  // Loaded only for an identity connection: @azure/identity is a quarter of the modules a
  // process with a connection string would otherwise load at start-up for nothing.
  const { DefaultAzureCredential, ManagedIdentityCredential } = require('@azure/identity') as typeof import('@azure/identity');
  const { clientId } = settings;
  return settings.credential === 'managedidentity'
    ? new ManagedIdentityCredential(clientId ? { clientId } : undefined)
    : new DefaultAzureCredential(clientId ? { managedIdentityClientId: clientId } : undefined);
}

/** A service client's endpoint without its query string, so never a SAS: safe to show. */
export function publicEndpoint(client: { url: string }): string {
  return (client.url.split('?')[0] ?? '').replace(/\/+$/, '');
}

/**
 * A connection string's endpoint and credential (its key or SAS), as the SDK reads them, by
 * service. Only the SDK parses connection strings, and only by building a client; a runtime builds
 * three clients with our policies on one string, so one plain client is read for all of them
 * (each build costs a cold start about a millisecond).
 */
const fromConnectionStrings = new Map<string, { url: string; credential: unknown }>();

function parsedConnection(service: 'blob' | 'queue', connectionString: string): { url: string; credential: unknown } {
  const key = `${service}\n${connectionString}`;
  let parsed = fromConnectionStrings.get(key);
  if (!parsed) {
    const client =
      service === 'blob'
        ? BlobServiceClient.fromConnectionString(connectionString)
        : QueueServiceClient.fromConnectionString(connectionString);
    // The queue client keeps `credential` protected in its typings; it is the same public field at run time.
    parsed = { url: client.url, credential: (client as unknown as { credential: unknown }).credential };
    fromConnectionStrings.set(key, parsed);
  }
  return parsed;
}

export function createBlobServiceClient(settings: StorageSettings, options: StorageClientOptions = {}): BlobServiceClient {
  if (settings.kind === 'connectionString' && !hasExtraPolicies(options)) {
    return BlobServiceClient.fromConnectionString(settings.connectionString, { retryOptions: options.retryOptions });
  }
  // Built on the URL and credential (a connection string's key or SAS included) with our policies in its pipeline.
  const { url, credential } =
    settings.kind === 'connectionString'
      ? parsedConnection('blob', settings.connectionString)
      : { url: settings.blobServiceUri, credential: credentialFor(settings, options) };
  const pipeline = newBlobPipeline(credential as Parameters<typeof newBlobPipeline>[0], { retryOptions: options.retryOptions });
  pipeline.factories.push(...extraPolicies(options, 'blob'));
  return new BlobServiceClient(url, pipeline);
}

export function createQueueServiceClient(settings: StorageSettings, options: StorageClientOptions = {}): QueueServiceClient {
  if (settings.kind === 'connectionString' && !hasExtraPolicies(options)) {
    return QueueServiceClient.fromConnectionString(settings.connectionString, { retryOptions: options.retryOptions });
  }
  const { url, credential } =
    settings.kind === 'connectionString'
      ? parsedConnection('queue', settings.connectionString)
      : { url: settings.queueServiceUri, credential: credentialFor(settings, options) };
  const pipeline = newQueuePipeline(credential as Parameters<typeof newQueuePipeline>[0], { retryOptions: options.retryOptions });
  pipeline.factories.push(...extraPolicies(options, 'queue'));
  return new QueueServiceClient(url, pipeline);
}

function hasExtraPolicies(options: StorageClientOptions): boolean {
  return options.requestCounter !== undefined || options.storageTime !== undefined;
}

function extraPolicies(options: StorageClientOptions, service: 'blob' | 'queue') {
  return [
    ...(options.requestCounter ? [options.requestCounter.policyFactory(service)] : []),
    ...(options.storageTime ? [storageTimePolicyFactory(options.storageTime)] : []),
  ];
}
