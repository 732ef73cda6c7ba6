import { appendFileSync, existsSync, readFileSync } from 'node:fs';
import { z } from 'zod';
import type { Exchange } from './fault-proxy';

/**
 * One blob write as storage answered it, taken off the wire between the instances and storage:
 * the instances' own logs are not trusted for this. `epoch` is the fencing epoch inside the
 * written document, `etag` the version storage gave it, and `ifMatch` / `ifNoneMatch` the
 * version it replaced, so the checker can put one document's writes in storage's own order.
 */
export const auditEntrySchema = z.object({
  at: z.number(),
  /** The proxy's answer order; writes are ordered by it, not by the wall clock. */
  seq: z.number().optional(),
  key: z.string(),
  /** Storage's status; 0 when the request reached storage and no answer came back. */
  status: z.number(),
  ifMatch: z.string().optional(),
  ifNoneMatch: z.string().optional(),
  etag: z.string().optional(),
  epoch: z.number().optional(),
  state: z.string().optional(),
  /** Storage applied it, but the client never heard (the proxy reset the connection). */
  hidden: z.boolean().optional(),
});
export type AuditEntry = z.infer<typeof auditEntrySchema>;

/** Whether a request is a whole-blob write into `container` (Put Blob: no `comp=` in the query). */
export function isAuditedWrite(method: string, url: string, container: string): boolean {
  if (method !== 'PUT') return false;
  const parsed = new URL(url, 'http://proxy');
  if (parsed.searchParams.has('comp')) return false;
  const [, , target, ...blob] = parsed.pathname.split('/');
  // Creating the container itself (`?restype=container`) names no document.
  return target === container && blob.join('/') !== '';
}

/**
 * The blob a request names inside `container` (decoded), or undefined when it names none there.
 * Path-style URLs, as the local emulator uses: /<account>/<container>/<blob name, encoded>.
 */
export function blobKeyOf(url: string, container: string): string | undefined {
  const [, , target, ...blob] = new URL(url, 'http://proxy').pathname.split('/');
  if (target !== container || blob.length === 0) return undefined;
  try {
    return blob.map((s) => decodeURIComponent(s)).join('/') || undefined;
  } catch {
    return undefined;
  }
}

/** The audit entry for one exchange, or undefined when it is not a write into `container`. */
export function auditEntryOf(exchange: Exchange, container: string): AuditEntry | undefined {
  if (!isAuditedWrite(exchange.method, exchange.url, container)) return undefined;
  const key = blobKeyOf(exchange.url, container);
  if (key === undefined) return undefined;
  const header = (name: string): string | undefined => {
    const value = exchange.requestHeaders[name];
    return Array.isArray(value) ? value[0] : value;
  };
  const entry: AuditEntry = { at: exchange.at, seq: exchange.seq, key, status: exchange.status };
  const ifMatch = header('if-match');
  const ifNoneMatch = header('if-none-match');
  if (ifMatch) entry.ifMatch = ifMatch;
  if (ifNoneMatch) entry.ifNoneMatch = ifNoneMatch;
  const etag = exchange.responseHeaders.etag;
  if (etag && exchange.status < 300) entry.etag = etag;
  if (exchange.hiddenFromClient) entry.hidden = true;
  // Refused writes carry no document; unanswered ones might have landed, so their epoch matters.
  if (exchange.body && exchange.status < 300) Object.assign(entry, fencedFields(exchange.body));
  return entry;
}

function fencedFields(body: Buffer): Pick<AuditEntry, 'epoch' | 'state'> {
  try {
    const parsed = JSON.parse(body.toString('utf8')) as { epoch?: unknown; value?: { state?: unknown } };
    const out: Pick<AuditEntry, 'epoch' | 'state'> = {};
    if (typeof parsed.epoch === 'number') out.epoch = parsed.epoch;
    if (typeof parsed.value?.state === 'string') out.state = parsed.value.state;
    return out;
  } catch {
    return {};
  }
}

/** Appends entries to an NDJSON file, one line each, as they happen, so a crash loses none. */
export class AuditTrailWriter {
  entries = 0;

  constructor(readonly file: string) {}

  append(entry: AuditEntry): void {
    appendFileSync(this.file, `${JSON.stringify(entry)}\n`);
    this.entries++;
  }
}

/** Reads an audit trail; a line that does not parse is an error naming the line. */
export function readAuditTrail(file: string): AuditEntry[] {
  if (!existsSync(file)) throw new Error(`audit trail ${file} does not exist`);
  const out: AuditEntry[] = [];
  for (const [index, line] of readFileSync(file, 'utf8').split('\n').entries()) {
    if (!line.trim()) continue;
    let json: unknown;
    try {
      json = JSON.parse(line);
    } catch {
      json = undefined;
    }
    const parsed = auditEntrySchema.safeParse(json);
    if (!parsed.success) throw new Error(`audit trail ${file} line ${index + 1} is not an audit entry`);
    out.push(parsed.data);
  }
  return out;
}
