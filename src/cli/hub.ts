import type { StorageRetryOptions } from '@azure/storage-blob';
import { hubResources } from '../hub/resources';
import { BlobDocumentStore } from '../fencing/blob-document-store';
import type {
  DocumentCallOptions,
  DocumentStore,
  DeleteOptions,
  FolderPage,
  KeyPage,
  ListPageOptions,
  StoredDocument,
  WriteCondition,
} from '../fencing/document-store';
import { BlobLeaseStore } from '../lease/blob-lease-store';
import type { LeaseCallOptions, LeaseReader, LeaseRecord } from '../lease/lease-store';
import { createBlobServiceClient, createQueueServiceClient, publicEndpoint } from '../storage/client-factory';
import { AzureQueue } from '../queue/azure-queue';
import { wakeHub } from '../hub/wake';
import { StorageTimeClock } from '../clock/storage-time-clock';
import { systemClock } from '../clock/clock';
import type { ConnectionSource, ResolvedConnection } from './connection';

/** Short SDK retries: a CLI should say "cannot reach" in seconds, not after a minute of backoff. */
export const CLI_RETRY_OPTIONS: StorageRetryOptions = {
  maxTries: 2,
  tryTimeoutInMs: 5000,
  retryDelayInMs: 200,
  maxRetryDelayInMs: 500,
};

/**
 * The longest one storage call (or one page of a listing) may take, retries included. The SDK's
 * `tryTimeoutInMs` is only a server-side timeout, so a host that accepts connections and never
 * answers would otherwise hang the CLI.
 */
export const CLI_CALL_TIMEOUT_MS = 10_000;

/** A storage call got no answer within the CLI's deadline. */
export class StorageTimeoutError extends Error {
  readonly code = 'ETIMEDOUT';

  constructor(readonly timeoutMs: number) {
    super(`no answer within ${formatSeconds(timeoutMs)}`);
    this.name = 'StorageTimeoutError';
  }
}

const formatSeconds = (ms: number) => `${Number((ms / 1000).toFixed(1))} s`;

/** What the commands read and write: one hub's documents and its leader lease. */
export interface HubHandle {
  hub: string;
  resources: ReturnType<typeof hubResources>;
  /** The blob endpoint without query string (never a SAS), for messages. */
  endpoint: string;
  source: ConnectionSource;
  docs: DocumentStore;
  lease: LeaseReader;
  /**
   * Storage's time, from the Date of its latest answer: what "3m ago" is measured from and what
   * requests are named by, so a machine whose clock is minutes off does not show a change "in 2
   * minutes". Before any answer, this machine's clock.
   */
  readonly clock: StorageTimeClock;
  /** Wakes a resting leader after a trigger (`wakeHub`); rejects when the message could not be sent. */
  wake(options?: { abortSignal?: AbortSignal }): Promise<void>;
}

export function openHub(connection: ResolvedConnection, options: { callTimeoutMs?: number } = {}): HubHandle {
  const timeoutMs = options.callTimeoutMs ?? CLI_CALL_TIMEOUT_MS;
  const clock = new StorageTimeClock(systemClock);
  const blobService = createBlobServiceClient(connection.storage, { retryOptions: CLI_RETRY_OPTIONS, storageTime: clock });
  const resources = hubResources(connection.hub);
  const endpoint = publicEndpoint(blobService);
  let wakeQueue: AzureQueue | undefined;
  const docs = new DeadlineDocumentStore(new BlobDocumentStore(blobService.getContainerClient(resources.container)), timeoutMs);
  return {
    hub: connection.hub,
    resources,
    endpoint,
    source: connection.source,
    docs,
    lease: new DeadlineLeaseReader(
      new BlobLeaseStore(blobService, connection.hub, { containerName: connection.leaseContainer }),
      timeoutMs,
    ),
    clock,
    wake: (options) => {
      // Made on first use: only a trigger sends a message, and the other commands load no queue client.
      wakeQueue ??= new AzureQueue(
        createQueueServiceClient(connection.storage, { retryOptions: CLI_RETRY_OPTIONS }),
        resources.workQueue,
      );
      const queue = wakeQueue;
      return withDeadline(timeoutMs, options?.abortSignal, (abortSignal) => wakeHub(queue, { abortSignal }));
    },
  };
}

/** Settles like `work`, or rejects with `StorageTimeoutError` after `timeoutMs` (calling `onTimeout` first). */
async function raceDeadline<T>(work: Promise<T>, timeoutMs: number, onTimeout: (err: StorageTimeoutError) => void): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const deadline = new Promise<never>((_, reject) => {
    timer = setTimeout(() => {
      const err = new StorageTimeoutError(timeoutMs);
      onTimeout(err);
      reject(err);
    }, timeoutMs);
  });
  work.catch(() => undefined); // a late rejection after the deadline is not unhandled
  try {
    return await Promise.race([work, deadline]);
  } finally {
    clearTimeout(timer);
  }
}

/** An abort controller that also aborts when `outer` does; `dispose` unhooks it. */
function linkedController(outer: AbortSignal | undefined): { controller: AbortController; dispose(): void } {
  const controller = new AbortController();
  const onAbort = () => controller.abort(outer?.reason);
  if (outer?.aborted) onAbort();
  else outer?.addEventListener('abort', onAbort, { once: true });
  return { controller, dispose: () => outer?.removeEventListener('abort', onAbort) };
}

/**
 * Runs `call` with a signal that aborts at the deadline (or when `outer` aborts), and rejects
 * with `StorageTimeoutError` at the deadline even if the call ignores its signal.
 */
async function withDeadline<T>(
  timeoutMs: number,
  outer: AbortSignal | undefined,
  call: (signal: AbortSignal) => Promise<T>,
): Promise<T> {
  const { controller, dispose } = linkedController(outer);
  try {
    return await raceDeadline(call(controller.signal), timeoutMs, (err) => controller.abort(err));
  } finally {
    dispose();
  }
}

/** A `DocumentStore` whose every call, and every page of a listing, ends by a deadline. */
export class DeadlineDocumentStore implements DocumentStore {
  constructor(
    private readonly inner: DocumentStore,
    private readonly timeoutMs: number,
  ) {}

  read(key: string, options?: DocumentCallOptions): Promise<StoredDocument | undefined> {
    return withDeadline(this.timeoutMs, options?.abortSignal, (abortSignal) => this.inner.read(key, { abortSignal }));
  }

  write(key: string, body: string, condition: WriteCondition, options?: DocumentCallOptions): Promise<{ etag: string }> {
    return withDeadline(this.timeoutMs, options?.abortSignal, (abortSignal) =>
      this.inner.write(key, body, condition, { abortSignal }),
    );
  }

  delete(key: string, options?: DeleteOptions): Promise<boolean> {
    return withDeadline(this.timeoutMs, options?.abortSignal, (abortSignal) =>
      this.inner.delete(key, { ...options, abortSignal }),
    );
  }

  listPage(prefix: string, options: ListPageOptions): Promise<KeyPage> {
    return withDeadline(this.timeoutMs, options.abortSignal, (abortSignal) =>
      this.inner.listPage(prefix, { ...options, abortSignal }),
    );
  }

  listFolders(prefix: string, options: ListPageOptions): Promise<FolderPage> {
    return withDeadline(this.timeoutMs, options.abortSignal, (abortSignal) =>
      this.inner.listFolders(prefix, { ...options, abortSignal }),
    );
  }

  async *list(prefix: string, options?: DocumentCallOptions): AsyncIterable<string> {
    // One signal for the whole listing, aborted when any one step (a page fetch) overruns.
    const { controller, dispose } = linkedController(options?.abortSignal);
    const iterator = this.inner.list(prefix, { abortSignal: controller.signal })[Symbol.asyncIterator]();
    let finished = false;
    try {
      for (;;) {
        const step = await raceDeadline(iterator.next(), this.timeoutMs, (err) => controller.abort(err));
        if (step.done) {
          finished = true;
          return;
        }
        yield step.value;
      }
    } finally {
      dispose();
      if (!finished) iterator.return?.(undefined).catch(() => undefined);
    }
  }
}

/** A lease's reader whose every read ends by a deadline. */
export class DeadlineLeaseReader implements LeaseReader {
  readonly description: string;

  constructor(
    private readonly inner: LeaseReader,
    private readonly timeoutMs: number,
  ) {
    this.description = inner.description;
  }

  read(options?: LeaseCallOptions): Promise<LeaseRecord> {
    return withDeadline(this.timeoutMs, options?.abortSignal, (abortSignal) => this.inner.read({ abortSignal }));
  }
}
