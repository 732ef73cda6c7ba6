/**
 * Keyless storage: `AzureWebJobsStorage__blobServiceUri` and `__queueServiceUri` make the client
 * factory authenticate with a `TokenCredential`. Requests go to a local HTTPS endpoint that
 * records each one, and every request must carry `Authorization: Bearer <token>`, for the scope
 * `https://storage.azure.com/.default`, with no SharedKey signature, account key or SAS anywhere.
 *
 * TLS is real. The Azure SDK refuses to send a bearer token over plain http (core-rest-pipeline's
 * bearerTokenAuthenticationPolicy throws "Bearer token authentication is not permitted for
 * non-TLS protected (non-https) URLs" before sending; shown below), so the endpoint is an
 * https server on 127.0.0.1 with a self-signed certificate made by `openssl` at test time, in
 * a temporary folder deleted as soon as it is read. The SDK takes no CA in its pipeline options
 * and sends through its own https.Agent, so this file adds the test certificate to the `ca` of
 * the SDK's `https.request` calls to that one host and port, for its own duration only:
 * verification stays on (the control test shows an untrusted certificate is refused before any
 * header leaves), and nothing is disabled process-wide (no NODE_TLS_REJECT_UNAUTHORIZED).
 */
import { execFileSync } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import http from 'node:http';
import { createRequire } from 'node:module';
import https from 'node:https';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { AccessToken, TokenCredential } from '@azure/identity';
import type { BlobServiceClient } from '@azure/storage-blob';
import type { QueueServiceClient } from '@azure/storage-queue';
import { afterAll, beforeAll, describe, expect, it, vi, type MockInstance } from 'vitest';
import { createBlobServiceClient, createQueueServiceClient, LEASE_RETRY_OPTIONS } from '../../src/storage/client-factory';
import { StorageRequestCounter } from '../../src/storage/request-counter';
import { parseStorageSettings, type StorageSettings } from '../../src/storage/connection';

// The CommonJS copy of @azure/identity, the one the factory loads (lazily, with require) and a
// built app runs; vitest's own import would bring the package's ES module build, other classes.
const { DefaultAzureCredential, ManagedIdentityCredential } = createRequire(__filename)(
  '@azure/identity',
) as typeof import('@azure/identity');

// Test setup only: a decoy in the environment the settings are parsed from; it must never be used.
const AZURITE_KEY = 'Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==';
const STORAGE_SCOPE = 'https://storage.azure.com/.default';
const CLIENT_ID = '6f1c2c7e-7b1f-4a55-9d0e-2f3b1c4d5e6f';

function hasOpenssl(): boolean {
  try {
    execFileSync('openssl', ['version'], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
}
const OPENSSL = hasOpenssl();

/** A P-256 key and a one-day certificate for 127.0.0.1, made now; the files are gone when this returns. */
function selfSignedCertificate(): { key: string; cert: string } {
  const dir = mkdtempSync(join(tmpdir(), 'baton-keyless-tls-'));
  try {
    const key = join(dir, 'key.pem');
    const cert = join(dir, 'cert.pem');
    execFileSync(
      'openssl',
      [
        'req',
        '-x509',
        '-newkey',
        'ec',
        '-pkeyopt',
        'ec_paramgen_curve:prime256v1',
        '-nodes',
        '-keyout',
        key,
        '-out',
        cert,
      ].concat(['-days', '1', '-subj', '/CN=127.0.0.1', '-addext', 'subjectAltName=IP:127.0.0.1']),
      { stdio: 'ignore' },
    );
    return { key: readFileSync(key, 'utf8'), cert: readFileSync(cert, 'utf8') };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

interface Seen {
  method: string;
  url: string;
  headers: http.IncomingHttpHeaders;
}

/** Answers what storage would, minimally: 201 for a lease acquire, a blob upload and a message put. */
function answer(req: http.IncomingMessage, res: http.ServerResponse): void {
  const url = new URL(req.url ?? '/', 'https://127.0.0.1');
  const date = new Date().toUTCString();
  const common = { 'x-ms-request-id': randomUUID(), 'x-ms-version': String(req.headers['x-ms-version'] ?? ''), date };
  if (req.method === 'PUT' && url.searchParams.get('comp') === 'lease') {
    res.writeHead(201, {
      ...common,
      etag: '"0x1"',
      'last-modified': date,
      'x-ms-lease-id': String(req.headers['x-ms-proposed-lease-id'] ?? randomUUID()),
    });
    res.end();
  } else if (req.method === 'PUT') {
    res.writeHead(201, { ...common, etag: '"0x2"', 'last-modified': date, 'x-ms-request-server-encrypted': 'true' });
    res.end();
  } else if (req.method === 'POST' && url.pathname.endsWith('/messages')) {
    res.writeHead(201, { ...common, 'content-type': 'application/xml' });
    res.end(
      '<?xml version="1.0" encoding="utf-8"?><QueueMessagesList><QueueMessage>' +
        `<MessageId>${randomUUID()}</MessageId><InsertionTime>${date}</InsertionTime><ExpirationTime>${date}</ExpirationTime>` +
        `<PopReceipt>AgAAAAMAAAAAAAAA</PopReceipt><TimeNextVisible>${date}</TimeNextVisible>` +
        '</QueueMessage></QueueMessagesList>',
    );
  } else {
    res.writeHead(400, { ...common, 'x-ms-error-code': 'UnsupportedByThisTest' });
    res.end();
  }
}

async function listen(server: http.Server): Promise<number> {
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return (server.address() as AddressInfo).port;
}

function recordingServer(create: (handler: http.RequestListener) => http.Server) {
  const seen: Seen[] = [];
  const server = create((req, res) => {
    seen.push({ method: req.method ?? '', url: req.url ?? '', headers: req.headers });
    req.resume();
    req.on('end', () => answer(req, res));
  });
  return { server, seen };
}

function fakeCredential(token: string): TokenCredential & { scopes: string[][] } {
  const scopes: string[][] = [];
  return {
    scopes,
    async getToken(requested): Promise<AccessToken> {
      scopes.push(Array.isArray(requested) ? [...requested] : [requested]);
      return { token, expiresOnTimestamp: Date.now() + 3600e3 };
    },
  };
}

/** One lease acquire and one upload on the blob client, one message on the queue client. */
async function leaseWriteSend(blobs: BlobServiceClient, queues: QueueServiceClient): Promise<void> {
  const leaseId = randomUUID();
  const lease = await blobs.getContainerClient('leases').getBlobClient('baton').getBlobLeaseClient(leaseId).acquireLease(15);
  expect(lease.leaseId).toBe(leaseId);
  const body = JSON.stringify({ epoch: 1 });
  await blobs.getContainerClient('baton-runs').getBlockBlobClient('runs/keyless/run.json').upload(body, Buffer.byteLength(body));
  const sent = await queues.getQueueClient('baton-work').sendMessage('{"v":1}');
  expect(sent.messageId).toMatch(/^[0-9a-f-]{36}$/);
}

const operation = (s: Seen) => {
  const url = new URL(s.url, 'https://127.0.0.1');
  if (url.searchParams.get('comp') === 'lease') return `${s.method} lease ${s.headers['x-ms-lease-action']}`;
  return `${s.method} ${url.pathname}`;
};

/** Nothing on the wire that a key, a SharedKey signature or a SAS would leave. */
function expectNoKeyMaterial(seen: Seen[]): void {
  for (const s of seen) {
    const wire = `${s.url}\n${JSON.stringify(s.headers)}`;
    expect(wire).not.toMatch(/SharedKey/i);
    expect(wire).not.toContain(AZURITE_KEY);
    expect(wire).not.toContain(encodeURIComponent(AZURITE_KEY));
    expect(new URL(s.url, 'https://127.0.0.1').searchParams.has('sig')).toBe(false);
  }
}

describe('ManagedIdentityCredential from settings (no network)', () => {
  const uris = {
    AzureWebJobsStorage__blobServiceUri: 'https://acct.blob.core.windows.net',
    AzureWebJobsStorage__queueServiceUri: 'https://acct.queue.core.windows.net',
  };

  it('__credential=managedidentity with __clientId: both clients get a ManagedIdentityCredential for that client id', () => {
    const spies = [
      vi.spyOn(http, 'request').mockImplementation(() => {
        throw new Error('network disabled');
      }),
      vi.spyOn(https, 'request').mockImplementation(() => {
        throw new Error('network disabled');
      }),
      vi.spyOn(globalThis, 'fetch'),
    ];
    try {
      const settings = parseStorageSettings({
        ...uris,
        AzureWebJobsStorage__credential: 'ManagedIdentity',
        AzureWebJobsStorage__clientId: CLIENT_ID,
      });
      expect(settings).toEqual({
        kind: 'identity',
        blobServiceUri: uris.AzureWebJobsStorage__blobServiceUri,
        queueServiceUri: uris.AzureWebJobsStorage__queueServiceUri,
        credential: 'managedidentity',
        clientId: CLIENT_ID,
      });
      const blob = createBlobServiceClient(settings, { requestCounter: new StorageRequestCounter() });
      const queue = createQueueServiceClient(settings);
      const queueCredential = (queue as unknown as { credential: unknown }).credential;
      for (const credential of [blob.credential, queueCredential]) {
        expect(credential).toBeInstanceOf(ManagedIdentityCredential);
        expect((credential as unknown as { clientId?: string }).clientId).toBe(CLIENT_ID);
      }
      // Without __credential the same URIs take DefaultAzureCredential, with the id as its managed identity.
      const fallback = createBlobServiceClient(parseStorageSettings({ ...uris, AzureWebJobsStorage__clientId: CLIENT_ID }));
      expect(fallback.credential).toBeInstanceOf(DefaultAzureCredential);
      expect(fallback.credential).not.toBeInstanceOf(ManagedIdentityCredential);
      for (const spy of spies) expect(spy).not.toHaveBeenCalled();
    } finally {
      for (const spy of spies) spy.mockRestore();
    }
  });
});

describe.skipIf(!OPENSSL)('keyless clients over TLS (a local https endpoint that records every request)', () => {
  let cert: string;
  let port: number;
  let tls: ReturnType<typeof recordingServer>;
  let trustTestCertificate = true;
  let requestSpy: MockInstance;
  let settings: StorageSettings;

  beforeAll(async () => {
    const pair = selfSignedCertificate();
    cert = pair.cert;
    tls = recordingServer((handler) => https.createServer({ key: pair.key, cert: pair.cert }, handler));
    port = await listen(tls.server);
    // The SDK calls https.request(options, callback) with its own agent; only requests to this server get the test CA.
    const original = https.request.bind(https) as (
      options: https.RequestOptions,
      cb?: (res: http.IncomingMessage) => void,
    ) => http.ClientRequest;
    requestSpy = vi.spyOn(https, 'request').mockImplementation(((
      options: https.RequestOptions,
      cb?: (res: http.IncomingMessage) => void,
    ) => {
      const ours = options.hostname === '127.0.0.1' && String(options.port) === String(port);
      return original(ours && trustTestCertificate ? { ...options, ca: [cert] } : options, cb);
    }) as unknown as typeof https.request);
    settings = parseStorageSettings({
      AzureWebJobsStorage__blobServiceUri: `https://127.0.0.1:${port}/devstoreaccount1`,
      AzureWebJobsStorage__queueServiceUri: `https://127.0.0.1:${port}/devstoreaccount1`,
      AZURE_STORAGE_KEY: AZURITE_KEY,
    });
  });

  afterAll(async () => {
    requestSpy?.mockRestore();
    await new Promise<void>((resolve) => (tls ? tls.server.close(() => resolve()) : resolve()));
  });

  it.each<[string, { counted: boolean }]>([
    ['as the CLI and jobs build them', { counted: false }],
    ['as the runtime builds them (counted pipeline, lease retry options)', { counted: true }],
  ])('blob lease, blob write and queue send carry only Authorization: Bearer <token> (%s)', async (_, how) => {
    expect(settings.kind).toBe('identity');
    const token = `fake-token-${randomUUID()}`;
    const credential = fakeCredential(token);
    const counter = new StorageRequestCounter();
    const options = how.counted ? { credential, requestCounter: counter, retryOptions: LEASE_RETRY_OPTIONS } : { credential };
    const from = tls.seen.length;

    await leaseWriteSend(createBlobServiceClient(settings, options), createQueueServiceClient(settings, options));

    const seen = tls.seen.slice(from);
    expect(seen.map(operation)).toEqual([
      'PUT lease acquire',
      'PUT /devstoreaccount1/baton-runs/runs/keyless/run.json',
      'POST /devstoreaccount1/baton-work/messages',
    ]);
    for (const s of seen) expect(s.headers.authorization).toBe(`Bearer ${token}`);
    expectNoKeyMaterial(seen);
    // Blob and queue each asked for a token, and only ever for storage's scope.
    expect(credential.scopes.length).toBeGreaterThanOrEqual(2);
    for (const scopes of credential.scopes) expect(scopes).toEqual([STORAGE_SCOPE]);
    if (how.counted) {
      expect(counter.snapshot()).toEqual({ 'blob.lease.acquire': 1, 'blob.put': 1, 'queue.messages.send': 1 });
    }
  });

  it('__credential=managedidentity: the ManagedIdentityCredential the factory built signs the requests (its token call stubbed)', async () => {
    const token = `mi-token-${randomUUID()}`;
    const asked: Array<{ clientId: string | undefined; scopes: string[] }> = [];
    const getToken = vi.spyOn(ManagedIdentityCredential.prototype, 'getToken').mockImplementation(async function (
      this: InstanceType<typeof ManagedIdentityCredential>,
      scopes,
    ) {
      asked.push({ clientId: (this as unknown as { clientId?: string }).clientId, scopes: [scopes].flat() });
      return { token, expiresOnTimestamp: Date.now() + 3600e3 };
    });
    try {
      const mi = parseStorageSettings({
        AzureWebJobsStorage__blobServiceUri: `https://127.0.0.1:${port}/devstoreaccount1`,
        AzureWebJobsStorage__queueServiceUri: `https://127.0.0.1:${port}/devstoreaccount1`,
        AzureWebJobsStorage__credential: 'managedidentity',
        AzureWebJobsStorage__clientId: CLIENT_ID,
      });
      const from = tls.seen.length;
      await leaseWriteSend(createBlobServiceClient(mi), createQueueServiceClient(mi));
      const seen = tls.seen.slice(from);
      expect(seen).toHaveLength(3);
      for (const s of seen) expect(s.headers.authorization).toBe(`Bearer ${token}`);
      expectNoKeyMaterial(seen);
      expect(asked.length).toBeGreaterThanOrEqual(2);
      for (const a of asked) expect(a).toEqual({ clientId: CLIENT_ID, scopes: [STORAGE_SCOPE] });
    } finally {
      getToken.mockRestore();
    }
  });

  it('control: TLS is verified; an endpoint whose certificate is not trusted gets no request at all', async () => {
    trustTestCertificate = false;
    try {
      const credential = fakeCredential('never-sent');
      const from = tls.seen.length;
      const blobs = createBlobServiceClient(settings, { credential, retryOptions: LEASE_RETRY_OPTIONS });
      const failure = await blobs
        .getContainerClient('leases')
        .getBlobClient('baton')
        .getBlobLeaseClient()
        .acquireLease(15)
        .catch((err: unknown) => err as { code?: string; message?: string });
      expect(failure).toMatchObject({ code: expect.stringMatching(/SELF_SIGNED|UNABLE_TO_VERIFY|CERT/) });
      expect(tls.seen.length).toBe(from);
    } finally {
      trustTestCertificate = true;
    }
  });

  it('over plain http (which the settings allow for localhost), the SDK refuses to send a bearer token at all', async () => {
    const plain = recordingServer((handler) => http.createServer(handler));
    const plainPort = await listen(plain.server);
    try {
      const local = parseStorageSettings({
        AzureWebJobsStorage__blobServiceUri: `http://127.0.0.1:${plainPort}/devstoreaccount1`,
        AzureWebJobsStorage__queueServiceUri: `http://127.0.0.1:${plainPort}/devstoreaccount1`,
      });
      expect(local.kind).toBe('identity');
      const credential = fakeCredential('never-sent');
      const refused = /Bearer token authentication is not permitted for non-TLS protected \(non-https\) URLs/;
      const blobs = createBlobServiceClient(local, { credential, retryOptions: LEASE_RETRY_OPTIONS });
      await expect(
        blobs.getContainerClient('leases').getBlobClient('baton').getBlobLeaseClient().acquireLease(15),
      ).rejects.toThrow(refused);
      const queues = createQueueServiceClient(local, { credential, retryOptions: LEASE_RETRY_OPTIONS });
      await expect(queues.getQueueClient('baton-work').sendMessage('{}')).rejects.toThrow(refused);
      expect(plain.seen).toEqual([]);
      expect(credential.scopes).toEqual([]);
    } finally {
      await new Promise<void>((resolve) => plain.server.close(() => resolve()));
    }
  });
});
