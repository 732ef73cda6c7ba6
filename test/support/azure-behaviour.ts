/**
 * Makes Azurite answer as Azure does where the pinned Azurite (3.37.0) does not, so that the
 * contract suites test Baton against Azure's behaviour. It is an Azure SDK pipeline policy in the
 * clients a test builds here; Azurite itself is untouched. What it corrects, each measured in
 * test/contract/azure-storage-behaviour.azurite.test.ts (raw Azurite's answer beside this
 * layer's) and listed in docs/testing.md:
 *
 * - Lease Blob `renew` of an expired lease (https://learn.microsoft.com/en-us/rest/api/storageservices/lease-blob):
 *   Azure renews only for the expired lease's own id and only if the blob was not modified since;
 *   otherwise 409. Azurite renews for any id (and answers with the old lease's id), and after an
 *   asynchronous Copy Blob onto the blob (Azurite#2352).
 * - Delete Message and Update Message with a stale pop receipt
 *   (https://learn.microsoft.com/en-us/rest/api/storageservices/delete-message2): Azure answers
 *   404 MessageNotFound, Azurite 400 PopReceiptMismatch.
 *
 * It learns who holds a lease and what the holder wrote from the answers passing through it, so
 * every client that touches the same blobs must come from the same `AzureBehaviour`.
 */
import { randomUUID } from 'node:crypto';
import { beforeAll } from 'vitest';
import type { AdditionalPolicyConfig } from '@azure/core-client';
import { createHttpHeaders, type PipelinePolicy, type PipelineRequest, type PipelineResponse } from '@azure/core-rest-pipeline';
import { BlobClient, BlobServiceClient, newPipeline as newBlobPipeline, type StorageRetryOptions } from '@azure/storage-blob';
import { newPipeline as newQueuePipeline, QueueServiceClient } from '@azure/storage-queue';
import { LEASE_RETRY_OPTIONS } from '../../src/storage/client-factory';
import { storageErrorOf } from '../../src/storage/rest-error';
import type { AzuriteFixture } from './azurite';

/** What the layer knows of one blob's leases. Lease ids are kept in lower case: they are GUIDs. */
interface BlobLeases {
  /** The id of the last lease acquired (or changed to) through the layer. */
  granted: string | undefined;
  /** Per lease id, the ETags its holder saw or made: the blob's ETag while that lease held. */
  etagsUnder: Map<string, Set<string>>;
}

export class AzureBehaviour {
  readonly blobPolicy: PipelinePolicy;
  readonly queuePolicy: PipelinePolicy;
  private readonly blobs = new Map<string, BlobLeases>();
  /** Outside the layer: for the reads the layer itself makes. */
  private readonly plainBlobService: BlobServiceClient;
  private readonly lookups = new Map<string, BlobClient>();

  constructor(private readonly connectionString: string) {
    this.plainBlobService = BlobServiceClient.fromConnectionString(connectionString, { retryOptions: { maxTries: 1 } });
    this.blobPolicy = { name: 'azureBehaviourBlob', sendRequest: (request, next) => this.sendBlob(request, next) };
    this.queuePolicy = { name: 'azureBehaviourQueue', sendRequest: (request, next) => this.sendQueue(request, next) };
  }

  /** A blob service client whose answers are Azure's. */
  blobService(retryOptions?: StorageRetryOptions): BlobServiceClient {
    const { url, credential } = this.plainBlobService;
    const options = withPolicy(retryOptions, this.blobPolicy);
    const client = new BlobServiceClient(url, newBlobPipeline(credential, options));
    delete options.additionalPolicies;
    return client;
  }

  /** A queue service client whose answers are Azure's. */
  queueService(retryOptions?: StorageRetryOptions): QueueServiceClient {
    const { url } = QueueServiceClient.fromConnectionString(this.connectionString);
    const options = withPolicy(retryOptions, this.queuePolicy);
    const client = new QueueServiceClient(url, newQueuePipeline(this.plainBlobService.credential, options));
    delete options.additionalPolicies;
    return client;
  }

  private async sendBlob(request: PipelineRequest, next: (request: PipelineRequest) => Promise<PipelineResponse>) {
    const action = leaseAction(request);
    const leaseId = request.headers.get('x-ms-lease-id')?.toLowerCase();
    if (action === 'renew' && leaseId !== undefined) {
      const refusal = await this.refuseRenew(request, leaseId);
      if (refusal) return refusal;
    }
    const response = await next(request);
    const leaseRelated = action !== undefined || leaseId !== undefined;
    if (leaseRelated && response.status >= 200 && response.status < 300) this.observe(request, response, action, leaseId);
    return response;
  }

  /** Azure's answer to a renew that Azurite would grant and Azure refuses, else undefined. */
  private async refuseRenew(request: PipelineRequest, leaseId: string): Promise<PipelineResponse | undefined> {
    const blob = this.blobs.get(blobKey(request.url));
    // Azure refuses a renew with any id but the blob's lease's, in every lease state.
    if (blob?.granted !== undefined && blob.granted !== leaseId) return leaseIdMismatch(request);
    if (blob?.granted !== leaseId) return undefined;
    let props;
    try {
      props = await this.lookup(request.url).getProperties({ abortSignal: request.abortSignal });
    } catch (err) {
      if (storageErrorOf(err)?.status === 404) return undefined;
      throw err;
    }
    // Expired, and the blob's ETag is none its holder saw: someone wrote to it since the lease ended.
    const seen = blob.etagsUnder.get(leaseId);
    if (props.leaseState === 'expired' && props.etag !== undefined && seen !== undefined && !seen.has(props.etag)) {
      return leaseIdMismatch(request);
    }
    return undefined;
  }

  private observe(request: PipelineRequest, response: PipelineResponse, action: string | undefined, leaseId: string | undefined) {
    const key = blobKey(request.url);
    const blob = this.blobs.get(key) ?? { granted: undefined, etagsUnder: new Map<string, Set<string>>() };
    this.blobs.set(key, blob);
    const answered = response.headers.get('x-ms-lease-id')?.toLowerCase();
    if ((action === 'acquire' || action === 'change') && answered !== undefined) blob.granted = answered;
    if (action === 'renew' && answered !== undefined && answered !== leaseId) {
      // Azurite renewed another id's expired lease: a lease taken outside this layer, which it cannot correct.
      throw new Error(
        `Azurite renewed lease ${answered} for a renew with ${leaseId} on ${key}; acquire leases through the same AzureBehaviour`,
      );
    }
    // A request under a lease succeeds only while that lease holds, so its ETag is one the holder saw.
    const under = action === 'acquire' || action === 'change' ? answered : leaseId;
    const etag = response.headers.get('etag');
    if (under !== undefined && etag !== undefined) {
      const seen = blob.etagsUnder.get(under) ?? new Set<string>();
      blob.etagsUnder.set(under, seen.add(etag));
    }
  }

  private async sendQueue(request: PipelineRequest, next: (request: PipelineRequest) => Promise<PipelineResponse>) {
    const response = await next(request);
    const onMessage =
      (request.method === 'DELETE' || request.method === 'PUT') && /\/messages\/[^/]+$/.test(new URL(request.url).pathname);
    if (onMessage && response.status === 400 && response.headers.get('x-ms-error-code') === 'PopReceiptMismatch') {
      return storageError(request, 404, 'MessageNotFound', 'The specified message does not exist.');
    }
    return response;
  }

  private lookup(url: string): BlobClient {
    const key = blobKey(url);
    let client = this.lookups.get(key);
    if (!client)
      this.lookups.set(key, (client = new BlobClient(key, this.plainBlobService.credential, { retryOptions: { maxTries: 1 } })));
    return client;
  }
}

/**
 * Pipeline options that put `policy` next to the wire (after signing, per try), where it sees and
 * makes raw answers. The first client built on the pipeline makes the core pipeline with it, and
 * every client derived from that one (a container's, a blob's, a queue's) reuses that core
 * pipeline but adds `additionalPolicies` again, which the pipeline refuses (two policies of one
 * name): so the caller deletes them once the first client is built.
 */
function withPolicy(retryOptions: StorageRetryOptions | undefined, policy: PipelinePolicy) {
  const options: { retryOptions?: StorageRetryOptions; additionalPolicies?: AdditionalPolicyConfig[] } = {
    retryOptions,
    additionalPolicies: [{ policy, position: 'perRetry' }],
  };
  return options;
}

function leaseAction(request: PipelineRequest): string | undefined {
  if (request.method !== 'PUT' || new URL(request.url).searchParams.get('comp') !== 'lease') return undefined;
  return request.headers.get('x-ms-lease-action')?.toLowerCase();
}

function blobKey(url: string): string {
  const { origin, pathname } = new URL(url);
  return origin + pathname;
}

function leaseIdMismatch(request: PipelineRequest): PipelineResponse {
  return storageError(
    request,
    409,
    'LeaseIdMismatchWithLeaseOperation',
    'The lease ID specified did not match the lease ID for the blob.',
  );
}

/** An error answer as the storage service sends it: the code in a header and in an XML body. */
function storageError(request: PipelineRequest, status: number, code: string, message: string): PipelineResponse {
  const requestId = randomUUID();
  const now = new Date();
  return {
    request,
    status,
    headers: createHttpHeaders({
      'content-type': 'application/xml',
      'x-ms-error-code': code,
      'x-ms-request-id': requestId,
      'x-ms-version': request.headers.get('x-ms-version') ?? '',
      date: now.toUTCString(),
    }),
    bodyAsText:
      `<?xml version="1.0" encoding="utf-8"?><Error><Code>${code}</Code>` +
      `<Message>${message}\nRequestId:${requestId}\nTime:${now.toISOString()}</Message></Error>`,
  };
}

export interface AzureBehaviourClients {
  readonly behaviour: AzureBehaviour;
  /** SDK default retries, as `AzuriteFixture.blobService`. */
  readonly blobService: BlobServiceClient;
  /** The lease calls' short retries, as `AzuriteFixture.leaseBlobService`. */
  readonly leaseBlobService: BlobServiceClient;
  readonly queueService: QueueServiceClient;
}

/** Clients on the file's Azurite that answer as Azure does; call after `useAzurite()`. */
export function useAzureBehaviour(fixture: AzuriteFixture): AzureBehaviourClients {
  let clients: AzureBehaviourClients | undefined;
  beforeAll(() => {
    const behaviour = new AzureBehaviour(fixture.azurite.connectionString);
    clients = {
      behaviour,
      blobService: behaviour.blobService(),
      leaseBlobService: behaviour.blobService(LEASE_RETRY_OPTIONS),
      queueService: behaviour.queueService(),
    };
  });
  const need = (): AzureBehaviourClients => {
    if (!clients) throw new Error('the Azure behaviour layer is not set up: use its clients inside tests');
    return clients;
  };
  return {
    get behaviour() {
      return need().behaviour;
    },
    get blobService() {
      return need().blobService;
    },
    get leaseBlobService() {
      return need().leaseBlobService;
    },
    get queueService() {
      return need().queueService;
    },
  };
}
