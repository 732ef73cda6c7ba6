import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { auditEntryOf, blobKeyOf, isAuditedWrite, type AuditEntry } from '../../chaos/audit-trail';
import type { ProxyProfile } from '../../chaos/fault-plan';
import { FaultProxy } from '../../chaos/fault-proxy';
import { BlobDocumentStore } from '../../src/fencing/blob-document-store';
import { FencedDocuments } from '../../src/fencing/fenced-documents';
import { startAzurite } from '../../src/local/azurite';
import { AzureQueue } from '../../src/queue/azure-queue';
import { createBlobServiceClient, createQueueServiceClient } from '../../src/storage/client-factory';
import { storageErrorOf } from '../../src/storage/rest-error';
import { useAzurite } from '../support/azurite';
import { timeBound } from '../support/time-bound';

const fixture = useAzurite();
const CONTAINER = 'audited';
const NONE: ProxyProfile = { latency: 0, latencyMs: [0, 0], unavailable: 0, resetBefore: 0, resetAfter: 0 };
const only = (action: keyof Omit<ProxyProfile, 'latencyMs'>, latencyMs: [number, number] = [0, 0]): ProxyProfile => ({
  ...NONE,
  [action]: 1,
  latencyMs,
});

let proxy: FaultProxy;
const audit: AuditEntry[] = [];
beforeAll(async () => {
  proxy = await FaultProxy.start({
    upstreamHost: '127.0.0.1',
    upstreamPort: fixture.azurite.blobPort,
    seed: 1,
    captureBody: (method, url) => isAuditedWrite(method, url, CONTAINER),
    onExchange: (exchange) => {
      const entry = auditEntryOf(exchange, CONTAINER);
      if (entry) audit.push(entry);
    },
  });
  await fixture.blobService.getContainerClient(CONTAINER).createIfNotExists();
});
afterAll(async () => {
  await proxy?.close();
});

/** The audited container, reached through the proxy with a single try per call. */
function proxiedContainer() {
  const connectionString = fixture.azurite.connectionString.replace(
    /BlobEndpoint=http:\/\/[^/]+/,
    `BlobEndpoint=http://127.0.0.1:${proxy.port}`,
  );
  const client = createBlobServiceClient({ kind: 'connectionString', connectionString }, { retryOptions: { maxTries: 1 } });
  return client.getContainerClient(CONTAINER);
}
const throughProxy = () => new BlobDocumentStore(proxiedContainer());
/** One Put Blob request, so a fault hits exactly that request. */
const put = (key: string, body = '{}', conditions: { ifNoneMatch?: string } = {}) =>
  proxiedContainer().getBlockBlobClient(key).upload(body, Buffer.byteLength(body), { conditions });
const direct = () => new BlobDocumentStore(fixture.blobService.getContainerClient(CONTAINER));

describe('the fault proxy', () => {
  it('passes requests through untouched and audits fenced writes as storage answered them', async () => {
    proxy.setProfile(undefined);
    const docs = new FencedDocuments<{ n: number }>(throughProxy());
    const key = `runs/job/${fixture.uniqueName('occ')}/run.json`;
    const created = await docs.create(key, 3, { n: 1 });
    const replaced = await docs.replace(key, 4, created, { n: 2 });
    // A write against the old version is refused by storage, and audited as refused.
    await expect(docs.replace(key, 4, created, { n: 3 })).rejects.toThrow();
    expect((await docs.read(key))?.value).toEqual({ n: 2 });

    const mine = audit.filter((e) => e.key === key);
    expect(mine.map((e) => [e.status, e.epoch, e.ifNoneMatch, e.ifMatch, e.etag])).toEqual([
      [201, 3, '*', undefined, created.etag],
      [201, 4, undefined, created.etag, replaced.etag],
      [412, undefined, undefined, created.etag, undefined],
    ]);
  });

  it('answers 503 ServerBusy without reaching storage', async () => {
    proxy.setProfile(only('unavailable'));
    const key = fixture.uniqueName('busy');
    const error = await put(key).then(
      () => undefined,
      (err: unknown) => err,
    );
    proxy.setProfile(undefined);
    expect(storageErrorOf(error)?.status).toBe(503);
    expect(await direct().read(key)).toBeUndefined();
  });

  it('resets a connection before storage sees the request', async () => {
    proxy.setProfile(only('resetBefore'));
    const key = fixture.uniqueName('before');
    await expect(put(key)).rejects.toThrow();
    proxy.setProfile(undefined);
    expect(await direct().read(key)).toBeUndefined();
  });

  it('resets a connection after storage applied the write, and audits it as hidden from the client', async () => {
    proxy.setProfile(only('resetAfter'));
    const key = fixture.uniqueName('after');
    await expect(put(key, JSON.stringify({ epoch: 9, value: {} }), { ifNoneMatch: '*' })).rejects.toThrow();
    proxy.setProfile(undefined);
    expect((await direct().read(key))?.body).toContain('"epoch":9');
    expect(audit.find((e) => e.key === key)).toMatchObject({ status: 201, epoch: 9, hidden: true });
  });

  it('delays requests by the profile latency', async () => {
    // The injected 300 ms is a timer, the same on any machine; the rest is the Put Blob itself,
    // to which a busy machine can add seconds.
    const slack = await timeBound(4_700);
    const boundMs = 300 + slack.ms;
    proxy.setProfile(only('latency', [300, 300]));
    const delayedBefore = proxy.counts.latency;
    const started = performance.now();
    await put(fixture.uniqueName('slow'));
    const elapsed = performance.now() - started;
    proxy.setProfile(undefined);
    expect(elapsed).toBeGreaterThanOrEqual(290);
    // Delayed once, for the one request; the wall-clock bound only catches a runaway delay.
    expect(proxy.counts.latency - delayedBefore).toBe(1);
    expect(elapsed, `bound ${boundMs} ms = 300 ms delay + slack (${slack.why})`).toBeLessThan(boundMs);
  });

  it('answers 500 to every request for one blob in an outage, serves the others, and serves it again after', async () => {
    const docs = new FencedDocuments<{ n: number }>(throughProxy());
    const key = `runs/job/${fixture.uniqueName('occ')}/run.json`;
    const other = `runs/job/${fixture.uniqueName('occ')}/run.json`;
    const created = await docs.create(key, 1, { n: 1 });
    await docs.create(other, 1, { n: 1 });
    const before = proxy.counts.outage;
    proxy.setOutage((_method, url) => blobKeyOf(url, CONTAINER) === key);
    const refused = (p: Promise<unknown>) =>
      p.then(
        () => undefined,
        (err: unknown) => storageErrorOf(err)?.status,
      );
    expect(await refused(docs.read(key))).toBe(500);
    expect(await refused(docs.replace(key, 1, created, { n: 2 }))).toBe(500);
    expect((await docs.read(other))?.value).toEqual({ n: 1 });
    proxy.setOutage(undefined);
    // Neither request reached storage: the write is not applied, and nothing was audited for it.
    expect(proxy.counts.outage - before).toBe(2);
    expect((await docs.read(key))?.value).toEqual({ n: 1 });
    expect(audit.filter((e) => e.key === key)).toHaveLength(1);
  });

  it('refuses everything while storage is down, and recovers when it is back', async () => {
    const before = proxy.counts.refused;
    await proxy.setUpstreamDown(true);
    await expect(put(fixture.uniqueName('down'))).rejects.toThrow();
    await proxy.setUpstreamDown(false);
    const key = fixture.uniqueName('back');
    await put(key);
    expect(await direct().read(key)).toBeDefined();
    expect(proxy.counts.refused).toBe(before + 1);
  });
});

describe('a persisted Azurite', () => {
  it('keeps blobs and queued messages across a restart on the same ports', async () => {
    const folder = mkdtempSync(join(tmpdir(), 'baton-persist-'));
    try {
      let azurite = await startAzurite({ persistTo: folder });
      const settings = () => ({ kind: 'connectionString', connectionString: azurite.connectionString }) as const;
      await new BlobDocumentStore(createBlobServiceClient(settings()).getContainerClient('kept')).write('a.json', '{"a":1}', {});
      const queue = new AzureQueue(createQueueServiceClient(settings()), 'kept');
      await queue.ensure();
      await queue.send('{"m":1}');
      const ports = { blobPort: azurite.blobPort, queuePort: azurite.queuePort };
      await azurite.close();

      azurite = await startAzurite({ persistTo: folder, ...ports });
      try {
        expect(azurite.blobPort).toBe(ports.blobPort);
        const blob = await new BlobDocumentStore(createBlobServiceClient(settings()).getContainerClient('kept')).read('a.json');
        expect(blob?.body).toBe('{"a":1}');
        const [message] = await new AzureQueue(createQueueServiceClient(settings()), 'kept').receive(1, 5);
        expect(message?.text).toBe('{"m":1}');
      } finally {
        await azurite.close();
      }
    } finally {
      rmSync(folder, { recursive: true, force: true });
    }
  });
});
