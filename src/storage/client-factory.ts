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

export function createBlobServiceClient(settings: StorageSettings, options: StorageClientOptions = {}): BlobServiceClient {
  const pipeline = { retryOptions: options.retryOptions };
  const client =
    settings.kind === 'connectionString'
      ? BlobServiceClient.fromConnectionString(settings.connectionString, pipeline)
      : new BlobServiceClient(settings.blobServiceUri, credentialFor(settings, options), pipeline);
  if (!options.requestCounter && !options.storageTime) return client;
  // Rebuilt on the same URL and credential (a connection string's key or SAS included) with our policies in its pipeline.
  const extended = newBlobPipeline(client.credential, pipeline);
  extended.factories.push(...extraPolicies(options, 'blob'));
  return new BlobServiceClient(client.url, extended);
}

export function createQueueServiceClient(settings: StorageSettings, options: StorageClientOptions = {}): QueueServiceClient {
  const pipeline = { retryOptions: options.retryOptions };
  const client =
    settings.kind === 'connectionString'
      ? QueueServiceClient.fromConnectionString(settings.connectionString, pipeline)
      : new QueueServiceClient(settings.queueServiceUri, credentialFor(settings, options), pipeline);
  if (!options.requestCounter && !options.storageTime) return client;
  // The queue client keeps `credential` protected in its typings; it is the same public field at run time.
  const { credential } = client as unknown as { credential: Parameters<typeof newQueuePipeline>[0] };
  const extended = newQueuePipeline(credential, pipeline);
  extended.factories.push(...extraPolicies(options, 'queue'));
  return new QueueServiceClient(client.url, extended);
}

function extraPolicies(options: StorageClientOptions, service: 'blob' | 'queue') {
  return [
    ...(options.requestCounter ? [options.requestCounter.policyFactory(service)] : []),
    ...(options.storageTime ? [storageTimePolicyFactory(options.storageTime)] : []),
  ];
}
