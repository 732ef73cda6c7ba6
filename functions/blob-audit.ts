import { createHash } from 'node:crypto';
import { setMaxListeners } from 'node:events';
import type { BlobClient, ContainerClient } from '@azure/storage-blob';
import { z } from 'zod';
import { defineJob, InvalidConfigError, type JobDefinition } from '../src/index';

/**
 * The sample operations job: scrub a container for integrity. `split` lists the container and
 * packs blob names into items; `process` downloads each blob and checks its bytes against the
 * stored Content-MD5 and Content-Length; the fold totals by prefix and keeps a bounded,
 * order-independent list of mismatches; `finalize` attaches a Markdown report to the run.
 */

/** The label for blobs whose name has no `/`. */
export const ROOT_PREFIX = '(root)';

export type MismatchReason = 'md5' | 'length';

export interface AuditMismatch {
  name: string;
  /** `length`: the bytes read differ in count from the stored Content-Length; `md5`: from the stored Content-MD5. */
  reason: MismatchReason;
}

export interface PrefixTotals {
  /** The first path segment of the blob name, or `(root)`. */
  prefix: string;
  count: number;
  bytes: number;
}

/** What `process` returns for one item (a batch of names). */
export interface AuditPartial {
  /** Sorted by prefix. */
  prefixes: PrefixTotals[];
  /** Blobs with no stored Content-MD5: their length is checked, their content cannot be. */
  withoutMd5: number;
  /** Blobs listed by `split` but deleted before they could be read; not counted anywhere else. */
  vanished: number;
  /** Sorted by name. */
  mismatches: AuditMismatch[];
}

/** The job's output (and its accumulator: small, JSON, and the same whatever the arrival order). */
export interface AuditOutput {
  /** Sorted by prefix. */
  prefixes: PrefixTotals[];
  blobs: number;
  bytes: number;
  withoutMd5: number;
  vanished: number;
  /** All mismatching blobs, listed or not. */
  mismatchCount: number;
  /** The lexicographically smallest `maxListedMismatches` mismatching names, sorted. */
  mismatches: AuditMismatch[];
}

export interface AuditItem {
  names: string[];
}

export interface BlobAuditOptions {
  /** The container to audit. */
  target: ContainerClient;
  /** Default `blob-audit`. */
  name?: string;
  /** Default `0 0 * * * *` (hourly). */
  schedule?: string;
  /** Blob names per item. Default 50. */
  batchSize?: number;
  /** Mismatching names kept in the output and report. Default 100. */
  maxListedMismatches?: number;
  /**
   * Blobs of one item read at once. Default 2. The host already runs up to 24 messages at once
   * per instance (batchSize plus newBatchThreshold), so keep this small: against one local
   * Azurite, 4 starved the leader's lease renewals.
   */
  downloadConcurrency?: number;
}

const LIST_PAGE_SIZE = 1000;
/** Reads retried when a blob that looked empty turns out not to be. */
const CHANGED_RETRIES = 3;

const prefixTotalsSchema = z.object({
  prefix: z.string(),
  count: z.number().int().nonnegative(),
  bytes: z.number().int().nonnegative(),
});
const mismatchSchema = z.object({ name: z.string(), reason: z.enum(['md5', 'length']) });

export const auditItemSchema: z.ZodType<AuditItem> = z.object({ names: z.array(z.string().min(1)).min(1) });

export const auditPartialSchema: z.ZodType<AuditPartial> = z.object({
  prefixes: z.array(prefixTotalsSchema),
  withoutMd5: z.number().int().nonnegative(),
  vanished: z.number().int().nonnegative(),
  mismatches: z.array(mismatchSchema),
});

/** The name the report is attached to its run under (`baton start --once` prints it). */
export const AUDIT_REPORT = 'report.md';

/** The HTTP status of a storage error (the SDK's RestError), if it is one. */
function statusOf(err: unknown): number | undefined {
  const status = (err as { statusCode?: unknown } | null)?.statusCode;
  return typeof status === 'number' ? status : undefined;
}

/** The prefix a blob is totalled under: its first path segment, or `(root)`. */
export function prefixOf(name: string): string {
  const slash = name.indexOf('/');
  return slash > 0 ? name.slice(0, slash) : ROOT_PREFIX;
}

/** Code-unit order, the same on every machine (unlike `localeCompare`). */
function compareText(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

function compareMismatch(a: AuditMismatch, b: AuditMismatch): number {
  return compareText(a.name, b.name) || compareText(a.reason, b.reason);
}

export function emptyAudit(): AuditOutput {
  return { prefixes: [], blobs: 0, bytes: 0, withoutMd5: 0, vanished: 0, mismatchCount: 0, mismatches: [] };
}

function mergePrefixes(a: readonly PrefixTotals[], b: readonly PrefixTotals[]): PrefixTotals[] {
  const totals = new Map<string, PrefixTotals>();
  for (const entry of [...a, ...b]) {
    const current = totals.get(entry.prefix);
    totals.set(
      entry.prefix,
      current ? { prefix: entry.prefix, count: current.count + entry.count, bytes: current.bytes + entry.bytes } : { ...entry },
    );
  }
  return [...totals.values()].sort((x, y) => compareText(x.prefix, y.prefix));
}

/**
 * Folds one partial summary into the totals. Sums, and a sorted list cut to the smallest
 * `maxListed` names, so the result is the same in any arrival order.
 */
export function addPartial(acc: AuditOutput, partial: AuditPartial, maxListed: number): AuditOutput {
  const prefixes = mergePrefixes(acc.prefixes, partial.prefixes);
  let blobs = acc.blobs;
  let bytes = acc.bytes;
  for (const entry of partial.prefixes) {
    blobs += entry.count;
    bytes += entry.bytes;
  }
  return {
    prefixes,
    blobs,
    bytes,
    withoutMd5: acc.withoutMd5 + partial.withoutMd5,
    vanished: acc.vanished + partial.vanished,
    mismatchCount: acc.mismatchCount + partial.mismatches.length,
    mismatches: [...acc.mismatches, ...partial.mismatches].sort(compareMismatch).slice(0, maxListed),
  };
}

type BlobCheck = { kind: 'gone' } | { kind: 'checked'; bytes: number; hasMd5: boolean; mismatch: MismatchReason | undefined };

/** Two audits of disjoint blobs as one (the durable engine merges chunks with it). */
export function mergeAudits(a: AuditOutput, b: AuditOutput, maxListed: number): AuditOutput {
  return {
    prefixes: mergePrefixes(a.prefixes, b.prefixes),
    blobs: a.blobs + b.blobs,
    bytes: a.bytes + b.bytes,
    withoutMd5: a.withoutMd5 + b.withoutMd5,
    vanished: a.vanished + b.vanished,
    mismatchCount: a.mismatchCount + b.mismatchCount,
    mismatches: [...a.mismatches, ...b.mismatches].sort(compareMismatch).slice(0, maxListed),
  };
}

/** A range past any blob's end: a ranged read returns the whole blob plus its stored MD5. */
const WHOLE_BLOB = 2 ** 52;
const EMPTY_MD5 = createHash('md5').digest();

function verdict(bytes: number, expectedBytes: number, stored: Uint8Array | undefined, actual: Buffer): BlobCheck {
  const hasMd5 = stored !== undefined && stored.length > 0;
  let mismatch: MismatchReason | undefined;
  if (bytes !== expectedBytes) mismatch = 'length';
  else if (hasMd5 && !actual.equals(Buffer.from(stored))) mismatch = 'md5';
  return { kind: 'checked', bytes, hasMd5, mismatch };
}

/**
 * One GET per blob, bytes and headers from the same version. It asks for a range on purpose:
 * on a ranged read the service returns the blob's stored Content-MD5 as
 * `x-ms-blob-content-md5` (absent when none is stored), whereas a whole-blob read may send a
 * Content-MD5 computed on the fly (Azurite does), which would hide a missing MD5. The total
 * length comes from Content-Range. An empty blob has no range to read (416), so its
 * properties are read instead.
 */
async function checkBlob(blob: BlobClient, signal: AbortSignal): Promise<BlobCheck> {
  for (let attempt = 1; ; attempt++) {
    signal.throwIfAborted();
    try {
      const download = await blob.download(0, WHOLE_BLOB, { abortSignal: signal });
      const hash = createHash('md5');
      let bytes = 0;
      const body = download.readableStreamBody;
      if (body) {
        for await (const chunk of body) {
          const buffer = typeof chunk === 'string' ? Buffer.from(chunk) : (chunk as Buffer);
          hash.update(buffer);
          bytes += buffer.length;
        }
      }
      const total = /\/(\d+)$/.exec(download.contentRange ?? '')?.[1];
      const expectedBytes = total !== undefined ? Number(total) : (download.contentLength ?? bytes);
      return verdict(bytes, expectedBytes, download.blobContentMD5, hash.digest());
    } catch (err) {
      if (signal.aborted) throw err;
      const status = statusOf(err);
      if (status === 404) return { kind: 'gone' };
      if (status !== 416) throw err;
    }
    // 416: the blob is empty (or was, a moment ago).
    try {
      const properties = await blob.getProperties({ abortSignal: signal });
      if (properties.contentLength === 0) return verdict(0, 0, properties.contentMD5, EMPTY_MD5);
      if (attempt >= CHANGED_RETRIES) throw new Error(`blob ${blob.name} keeps changing size while it is read`);
    } catch (err) {
      if (signal.aborted) throw err;
      if (statusOf(err) === 404) return { kind: 'gone' };
      throw err;
    }
  }
}

async function auditNames(
  target: ContainerClient,
  names: readonly string[],
  concurrency: number,
  signal: AbortSignal,
): Promise<AuditPartial> {
  // One listener on the caller's signal; the many concurrent calls listen on this one.
  const local = new AbortController();
  setMaxListeners(0, local.signal);
  const forward = () => local.abort(signal.reason);
  signal.addEventListener('abort', forward, { once: true });
  if (signal.aborted) forward();
  const checks: BlobCheck[] = new Array<BlobCheck>(names.length);
  try {
    let next = 0;
    const lane = async () => {
      try {
        while (next < names.length) {
          const index = next++;
          checks[index] = await checkBlob(target.getBlobClient(names[index] as string), local.signal);
        }
      } catch (err) {
        local.abort(err); // the item fails: stop the other lanes too
        throw err;
      }
    };
    await Promise.all(Array.from({ length: Math.min(concurrency, names.length) }, lane));
  } finally {
    signal.removeEventListener('abort', forward);
  }

  const partial: AuditPartial = { prefixes: [], withoutMd5: 0, vanished: 0, mismatches: [] };
  const own: PrefixTotals[] = [];
  names.forEach((name, index) => {
    const check = checks[index] as BlobCheck;
    if (check.kind === 'gone') {
      partial.vanished++;
      return;
    }
    own.push({ prefix: prefixOf(name), count: 1, bytes: check.bytes });
    if (!check.hasMd5) partial.withoutMd5++;
    if (check.mismatch) partial.mismatches.push({ name, reason: check.mismatch });
  });
  partial.prefixes = mergePrefixes([], own);
  partial.mismatches.sort(compareMismatch);
  return partial;
}

function positiveInt(value: number | undefined, fallback: number, option: string, min: number): number {
  if (value === undefined) return fallback;
  if (!Number.isInteger(value) || value < min) {
    throw new InvalidConfigError(option, `${option} must be a whole number of at least ${min}`);
  }
  return value;
}

/** Declares the audit job for one target container. */
export function createBlobAuditJob(options: BlobAuditOptions): JobDefinition<AuditItem, AuditPartial, AuditOutput, AuditOutput> {
  const name = options.name ?? 'blob-audit';
  const batchSize = positiveInt(options.batchSize, 50, `${name}.batchSize`, 1);
  const maxListed = positiveInt(options.maxListedMismatches, 100, `${name}.maxListedMismatches`, 0);
  const concurrency = positiveInt(options.downloadConcurrency, 2, `${name}.downloadConcurrency`, 1);
  const { target } = options;

  return defineJob<AuditItem, AuditPartial, AuditOutput, AuditOutput>({
    name,
    schedule: options.schedule ?? '0 0 * * * *',
    itemSchema: auditItemSchema,
    resultSchema: auditPartialSchema,
    async *split(ctx) {
      let names: string[] = [];
      for await (const page of target.listBlobsFlat({ abortSignal: ctx.signal }).byPage({ maxPageSize: LIST_PAGE_SIZE })) {
        for (const blob of page.segment.blobItems) {
          names.push(blob.name);
          if (names.length === batchSize) {
            yield { names };
            names = [];
          }
        }
      }
      if (names.length > 0) yield { names };
    },
    process: (item, ctx) => auditNames(target, item.names, concurrency, ctx.signal),
    aggregate: {
      initial: emptyAudit,
      add: (acc, partial) => addPartial(acc, partial, maxListed),
      merge: (a, b) => mergeAudits(a, b, maxListed),
    },
    async finalize(output, ctx) {
      await ctx.attach(AUDIT_REPORT, renderAuditReport(output, ctx.runId, { state: ctx.state, counters: ctx.counters }));
    },
  });
}

/** Inline code that survives any name: a fence longer than any backtick run inside, on one line. */
function code(text: string): string {
  const flat = text.replace(/[\r\n]+/g, ' ');
  const longest = Math.max(0, ...(flat.match(/`+/g) ?? []).map((run) => run.length));
  const fence = '`'.repeat(longest + 1);
  const pad = flat.startsWith('`') || flat.endsWith('`') || flat.startsWith(' ') ? ' ' : '';
  return `${fence}${pad}${flat}${pad}${fence}`;
}

/** A table cell: pipes escaped (GFM needs that even inside code spans). */
function cell(text: string): string {
  return text.replace(/\|/g, '\\|');
}

function formatBytes(bytes: number): string {
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let value = bytes;
  let unit = 0;
  while (value >= 1024 && unit < units.length - 1) {
    value /= 1024;
    unit++;
  }
  const exact = bytes.toLocaleString('en-US');
  return unit === 0 ? `${exact} B` : `${exact} B (${value.toFixed(1)} ${units[unit]})`;
}

/** A readable Markdown report of one audit: totals by prefix, mismatches, blobs without MD5. */
export function renderAuditReport(
  output: AuditOutput,
  runId: string,
  run?: { state: 'succeeded' | 'failed'; counters: { planned: number; succeeded: number; failed: number } },
): string {
  const n = (value: number) => value.toLocaleString('en-US');
  const lines: string[] = [`# Blob audit report`, '', `Run ${code(runId)}.`, ''];
  if (run) {
    lines.push(
      run.counters.failed > 0
        ? `**Incomplete:** ${n(run.counters.failed)} of ${n(run.counters.planned)} batches could not be audited; the totals below leave them out (run ${run.state}).`
        : `All ${n(run.counters.planned)} batches audited (run ${run.state}).`,
      '',
    );
  }
  lines.push('## By prefix', '', '| Prefix | Blobs | Bytes |', '| --- | ---: | ---: |');
  for (const entry of output.prefixes) {
    lines.push(`| ${cell(code(entry.prefix))} | ${n(entry.count)} | ${n(entry.bytes)} |`);
  }
  lines.push(`| **Total** | **${n(output.blobs)}** | **${n(output.bytes)}** |`, '');

  lines.push(
    '## Totals',
    '',
    `- Blobs audited: ${n(output.blobs)}`,
    `- Bytes read: ${formatBytes(output.bytes)}`,
    `- Mismatches: ${n(output.mismatchCount)}`,
    `- Blobs without a stored MD5: ${n(output.withoutMd5)}`,
  );
  if (output.vanished > 0) lines.push(`- Listed but deleted before they were read: ${n(output.vanished)}`);
  lines.push('');

  lines.push('## Mismatches', '');
  if (output.mismatchCount === 0) {
    lines.push('None: every blob with a stored MD5 matches it, and every length matches.');
  } else {
    for (const mismatch of output.mismatches) {
      const why =
        mismatch.reason === 'md5' ? 'content does not match the stored Content-MD5' : 'length differs from Content-Length';
      lines.push(`- ${code(mismatch.name)}: ${why}`);
    }
    const unlisted = output.mismatchCount - output.mismatches.length;
    if (unlisted > 0)
      lines.push('', `…and ${n(unlisted)} more not listed (the first ${n(output.mismatches.length)} by name are shown).`);
  }
  lines.push('');

  lines.push('## Blobs without MD5', '');
  lines.push(
    output.withoutMd5 === 0
      ? 'None: every blob has a stored Content-MD5.'
      : `${n(output.withoutMd5)} blob(s) have no stored Content-MD5, so only their length was checked. ` +
          'Blobs committed from blocks get none unless the uploader sets one.',
  );
  lines.push('');
  return lines.join('\n');
}
