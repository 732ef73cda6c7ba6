import type { AccessToken, TokenCredential } from '@azure/identity';
import http from 'node:http';
import https from 'node:https';
import { createRequire } from 'node:module';
import { afterEach, describe, expect, it, vi } from 'vitest';
import {
  createBlobServiceClient,
  createQueueServiceClient,
  LEASE_RETRY_OPTIONS,
  publicEndpoint,
} from '../../../src/storage/client-factory.js';
import { parseStorageSettings, type StorageSettings } from '../../../src/storage/connection.js';

// The CommonJS copy of @azure/identity, the one the factory loads (lazily, with require) and a
// built app runs; vitest's own import would bring the package's ES module build, other classes.
const { DefaultAzureCredential, ManagedIdentityCredential } = createRequire(__filename)(
  '@azure/identity',
) as typeof import('@azure/identity');

const AZURITE_KEY = 'Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==';

// URL normalization adds a trailing slash to bare hosts; compare the parsed form.
const sameUrl = (actual: string, expected: string) => expect(new URL(actual).href).toBe(new URL(expected).href);

function fakeCredential(): TokenCredential & { calls: unknown[] } {
  const calls: unknown[] = [];
  return {
    calls,
    async getToken(scopes): Promise<AccessToken> {
      calls.push(scopes);
      return { token: 'x', expiresOnTimestamp: Date.now() + 3600e3 };
    },
  };
}

// The SDK sends through node:http(s); make any attempt visible and keep it off the wire.
function blockNetwork() {
  const refuse = () => {
    throw new Error('network disabled in unit tests');
  };
  return [vi.spyOn(http, 'request').mockImplementation(refuse), vi.spyOn(https, 'request').mockImplementation(refuse)];
}

afterEach(() => {
  vi.restoreAllMocks();
});

describe('connection strings', () => {
  it('points the clients at the endpoints in the string', () => {
    const settings = parseStorageSettings({
      AzureWebJobsStorage:
        `DefaultEndpointsProtocol=http;AccountName=devstoreaccount1;AccountKey=${AZURITE_KEY};` +
        'BlobEndpoint=http://127.0.0.1:10000/devstoreaccount1;QueueEndpoint=http://127.0.0.1:10001/devstoreaccount1;',
    });
    const blob = createBlobServiceClient(settings, { retryOptions: LEASE_RETRY_OPTIONS });
    const queue = createQueueServiceClient(settings);
    sameUrl(blob.url, 'http://127.0.0.1:10000/devstoreaccount1');
    sameUrl(queue.url, 'http://127.0.0.1:10001/devstoreaccount1');
    expect(blob.accountName).toBe('devstoreaccount1');
  });

  it('maps UseDevelopmentStorage=true to Azurite', () => {
    const settings = parseStorageSettings({ AzureWebJobsStorage: 'UseDevelopmentStorage=true' });
    sameUrl(createBlobServiceClient(settings).url, 'http://127.0.0.1:10000/devstoreaccount1');
    sameUrl(createQueueServiceClient(settings).url, 'http://127.0.0.1:10001/devstoreaccount1');
  });

  it('derives endpoints the SDK would not derive on its own', () => {
    const settings = parseStorageSettings({ AzureWebJobsStorage: `AccountName=acct;AccountKey=${AZURITE_KEY}` });
    sameUrl(createBlobServiceClient(settings).url, 'https://acct.blob.core.windows.net');
    sameUrl(createQueueServiceClient(settings).url, 'https://acct.queue.core.windows.net');
  });

  it('builds SAS clients', () => {
    const settings = parseStorageSettings({ AzureWebJobsStorage: 'AccountName=acct;SharedAccessSignature=sv=1&sig=abc' });
    expect(new URL(createBlobServiceClient(settings).url).searchParams.get('sig')).toBe('abc');
    expect(new URL(createQueueServiceClient(settings).url).searchParams.get('sig')).toBe('abc');
  });
});

describe('identity', () => {
  type IdentitySettings = Extract<StorageSettings, { kind: 'identity' }>;
  const settings: IdentitySettings = {
    kind: 'identity',
    blobServiceUri: 'https://acct.blob.core.windows.net',
    queueServiceUri: 'https://acct.queue.core.windows.net',
  };

  it('uses the configured URIs and the override credential', () => {
    const credential = fakeCredential();
    const blob = createBlobServiceClient(settings, { credential });
    const queue = createQueueServiceClient(settings, { credential });
    sameUrl(blob.url, settings.blobServiceUri);
    sameUrl(queue.url, settings.queueServiceUri);
    expect(blob.credential).toBe(credential);
    expect(credential.calls).toEqual([]);
  });

  // Proves the network guard below would catch a request if one were made.
  it('sends requests through node:https with the override credential (guarded)', async () => {
    const [, httpsSpy] = blockNetwork();
    const credential = fakeCredential();
    const blob = createBlobServiceClient(settings, { credential, retryOptions: LEASE_RETRY_OPTIONS });
    await expect(blob.getProperties()).rejects.toThrow();
    expect(credential.calls.length).toBeGreaterThan(0);
    expect(httpsSpy).toHaveBeenCalledTimes(1);
  });

  it.each<[string, IdentitySettings]>([
    ['DefaultAzureCredential', settings],
    ['DefaultAzureCredential with a client id', { ...settings, clientId: '6f1c2c7e-7b1f-4a55-9d0e-2f3b1c4d5e6f' }],
    ['ManagedIdentityCredential', { ...settings, credential: 'managedidentity' }],
    [
      'ManagedIdentityCredential with a client id',
      { ...settings, credential: 'managedidentity', clientId: '6f1c2c7e-7b1f-4a55-9d0e-2f3b1c4d5e6f' },
    ],
  ])('builds a %s client without touching the network', (name, s) => {
    const spies = [...blockNetwork(), vi.spyOn(globalThis, 'fetch')];
    const blob = createBlobServiceClient(s);
    const queue = createQueueServiceClient(s);
    sameUrl(blob.url, s.blobServiceUri);
    sameUrl(queue.url, s.queueServiceUri);
    const expected = name.startsWith('Managed') ? ManagedIdentityCredential : DefaultAzureCredential;
    expect(blob.credential).toBeInstanceOf(expected);
    for (const spy of spies) expect(spy).not.toHaveBeenCalled();
  });
});

describe('publicEndpoint', () => {
  it('drops the query string, so a SAS never shows, and the trailing slash', () => {
    expect(publicEndpoint({ url: 'https://acct.blob.core.windows.net/?sv=2024-01-01&sig=secret' })).toBe(
      'https://acct.blob.core.windows.net',
    );
    expect(publicEndpoint({ url: 'http://127.0.0.1:10000/devstoreaccount1' })).toBe('http://127.0.0.1:10000/devstoreaccount1');
  });
});
