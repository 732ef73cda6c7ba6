/**
 * Only "it is already there" and "it changed since it was read" mean a concurrent update. A write
 * that storage refuses for another reason (a lease someone holds on the blob, a container being
 * deleted) is an error, not a copy someone else wrote: taken as one, a finalizer would end a run
 * `succeeded` with no output, and a fenced update would re-read and retry forever.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ConcurrentUpdateError } from '../../src/errors';
import { BlobDocumentStore } from '../../src/fencing/blob-document-store';
import { writeOnce } from '../../src/fencing/write-once';
import { createBlobServiceClient } from '../../src/storage/client-factory';
import { storageErrorOf } from '../../src/storage/rest-error';
import { useAzurite } from '../support/azurite';
import { azuriteStyleConnection } from '../support/cli-harness';

const fixture = useAzurite();

describe('BlobDocumentStore: refusals that are not concurrent updates', () => {
  it('a blob leased from outside refuses the write (412 LeaseIdMissing): an error, not a concurrent update', async () => {
    const container = fixture.blobService.getContainerClient(fixture.uniqueName('leased'));
    const store = new BlobDocumentStore(container);
    const { etag } = await store.write('run.json', '{"v":1}', { ifNoneMatch: '*' });
    await container.getBlobClient('run.json').getBlobLeaseClient().acquireLease(15);
    const refused = await store.write('run.json', '{"v":2}', { ifMatch: etag }).catch((err: unknown) => err);
    expect(refused).not.toBeInstanceOf(ConcurrentUpdateError);
    expect(storageErrorOf(refused)).toEqual({ status: 412, code: 'LeaseIdMissing' });
    // The ETag conditions still mean what they say.
    await expect(store.write('run.json', '{"v":2}', { ifMatch: '"0x1"' })).rejects.toBeInstanceOf(ConcurrentUpdateError);
    await expect(store.write('run.json', '{"v":2}', { ifNoneMatch: '*' })).rejects.toBeInstanceOf(ConcurrentUpdateError);
  });

  describe('a container being deleted (409 ContainerBeingDeleted)', () => {
    let server: http.Server;
    let port = 0;
    beforeAll(async () => {
      // Creating the container succeeds; every blob write is refused the way Azure refuses it
      // for the seconds a deleted container takes to go.
      server = http.createServer((req, res) => {
        req.resume();
        req.on('end', () => {
          const common = { 'x-ms-request-id': 'r', 'x-ms-version': String(req.headers['x-ms-version'] ?? '') };
          if (req.url?.includes('restype=container')) {
            res.writeHead(201, { ...common, etag: '"0x1"', 'last-modified': new Date().toUTCString() }).end();
            return;
          }
          const body =
            '<?xml version="1.0" encoding="utf-8"?><Error><Code>ContainerBeingDeleted</Code>' +
            '<Message>The specified container is being deleted.</Message></Error>';
          res
            .writeHead(409, { ...common, 'x-ms-error-code': 'ContainerBeingDeleted', 'content-type': 'application/xml' })
            .end(body);
        });
      });
      await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
      port = (server.address() as AddressInfo).port;
    });
    afterAll(async () => {
      await new Promise<void>((resolve) => server.close(() => resolve()));
    });

    it('a write-once output is not taken as written by someone else', async () => {
      const key = Buffer.from('not the real key').toString('base64');
      const blobs = createBlobServiceClient({ kind: 'connectionString', connectionString: azuriteStyleConnection(port, key) });
      const store = new BlobDocumentStore(blobs.getContainerClient('hub'));
      const refused = await store.write('output.json', '{}', { ifNoneMatch: '*' }).catch((err: unknown) => err);
      expect(refused).not.toBeInstanceOf(ConcurrentUpdateError);
      expect(storageErrorOf(refused)).toEqual({ status: 409, code: 'ContainerBeingDeleted' });
      await expect(writeOnce(store, 'output.json', { out: 1 })).rejects.toMatchObject({ statusCode: 409 });
    });
  });
});
