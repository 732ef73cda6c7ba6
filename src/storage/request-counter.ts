import type { RequestPolicy, RequestPolicyFactory, WebResource } from '@azure/storage-blob';

/**
 * Counts storage requests by operation, for every client the factory builds with it. Storage
 * bills per operation, so this is Baton's cost metric: the benchmarks sum it over processes, and
 * the runtime reports it (see `BatonRuntime.storageRequests`). It also adds up the request body
 * bytes each operation sends (what a run writes to storage), so a benchmark can tell whether
 * writes per item grow with the size of a run.
 *
 * The count is taken once per operation, before the SDK's retry policy: an operation the SDK
 * retries counts once, and so do its bytes.
 */
export class StorageRequestCounter {
  private readonly counts = new Map<string, number>();
  private readonly bytes = new Map<string, number>();
  private sum = 0;
  private bytesSum = 0;

  record(operation: string, bodyBytes = 0): void {
    this.counts.set(operation, (this.counts.get(operation) ?? 0) + 1);
    this.sum++;
    if (bodyBytes > 0) {
      this.bytes.set(operation, (this.bytes.get(operation) ?? 0) + bodyBytes);
      this.bytesSum += bodyBytes;
    }
  }

  get total(): number {
    return this.sum;
  }

  /** Request body bytes sent so far, over every operation. */
  get totalBytes(): number {
    return this.bytesSum;
  }

  /** Counts so far by operation name, sorted by name. */
  snapshot(): Record<string, number> {
    return Object.fromEntries([...this.counts.entries()].sort(([a], [b]) => a.localeCompare(b)));
  }

  /** Request body bytes sent so far by operation name (operations that sent none left out), sorted by name. */
  bytesSnapshot(): Record<string, number> {
    return Object.fromEntries([...this.bytes.entries()].sort(([a], [b]) => a.localeCompare(b)));
  }

  /** The pipeline factory that feeds this counter, for a client of `service`; the client factory adds it. */
  policyFactory(service: StorageService): RequestPolicyFactory {
    return {
      create: (next: RequestPolicy): RequestPolicy => ({
        sendRequest: (request: WebResource) => {
          this.record(
            storageOperationName(service, request.method, request.url, (name) => request.headers.get(name)),
            requestBodyBytes(request.body, request.headers.get('content-length')),
          );
          return next.sendRequest(request);
        },
      }),
    };
  }
}

export type StorageService = 'blob' | 'queue';

/**
 * The bytes a request's body will send: its Content-Length when the SDK has set one (uploads
 * do), else the length of a string or binary body (queue messages are XML strings). A streamed
 * body without a length counts 0; Baton sends none.
 */
export function requestBodyBytes(body: unknown, contentLength: string | undefined): number {
  const declared = contentLength === undefined ? Number.NaN : Number(contentLength);
  if (Number.isFinite(declared) && declared >= 0) return declared;
  if (typeof body === 'string') return Buffer.byteLength(body);
  if (body instanceof ArrayBuffer) return body.byteLength;
  if (ArrayBuffer.isView(body)) return body.byteLength;
  return 0;
}

/** What was counted between two snapshots of one counter, operations with none left out. */
export function requestCountsSince(
  now: Readonly<Record<string, number>>,
  before: Readonly<Record<string, number>>,
): Record<string, number> {
  return Object.fromEntries(
    Object.entries(now)
      .map(([op, n]) => [op, n - (before[op] ?? 0)] as const)
      .filter(([, n]) => n > 0),
  );
}

/** Adds two snapshots (e.g. from several processes). */
export function sumRequestCounts(...snapshots: readonly Record<string, number>[]): Record<string, number> {
  const sum: Record<string, number> = {};
  for (const snapshot of snapshots) for (const [op, n] of Object.entries(snapshot)) sum[op] = (sum[op] ?? 0) + n;
  return Object.fromEntries(Object.entries(sum).sort(([a], [b]) => a.localeCompare(b)));
}

/**
 * A stable name for a storage REST call, e.g. `blob.lease.renew`, `queue.messages.receive`,
 * `blob.put`, `container.list`. Built from the method, the path depth and the `comp`/`restype`
 * query parameters the REST API uses to tell operations apart.
 */
export function storageOperationName(
  service: StorageService,
  method: string,
  url: string,
  header: (name: string) => string | undefined,
): string {
  const parsed = new URL(url);
  const comp = parsed.searchParams.get('comp');
  const restype = parsed.searchParams.get('restype');
  const segments = resourceSegments(parsed);
  const verb = method.toLowerCase();
  if (segments.length === 0) return `${service}.service.${comp ?? verb}`;
  if (service === 'queue') {
    // /<queue>/messages[/<id>]
    if (segments[1] === 'messages') {
      if (verb === 'post') return 'queue.messages.send';
      if (verb === 'get')
        return parsed.searchParams.get('peekonly') === 'true' ? 'queue.messages.peek' : 'queue.messages.receive';
      if (verb === 'delete') return segments.length > 2 ? 'queue.messages.delete' : 'queue.messages.clear';
      if (verb === 'put') return 'queue.messages.update';
    }
    return `queue.${comp ?? verb}`;
  }
  const kind = segments.length === 1 || restype === 'container' ? 'container' : 'blob';
  if (comp === 'lease') return `${kind}.lease.${header('x-ms-lease-action') ?? 'unknown'}`;
  return `${kind}.${comp ?? verb}`;
}

/**
 * The path below the account. Azurite and other IP or localhost endpoints are path-style: the
 * account is the first segment.
 */
function resourceSegments(url: URL): string[] {
  const segments = url.pathname.split('/').filter((s) => s !== '');
  const pathStyle = url.hostname === 'localhost' || /^[\d.]+$/.test(url.hostname) || url.hostname.startsWith('[');
  return pathStyle ? segments.slice(1) : segments;
}
