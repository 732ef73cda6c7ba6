import { createHash } from 'node:crypto';
import type { ContainerClient } from '@azure/storage-blob';
import { InvalidConfigError } from '../src/index';
import { blobServiceClient } from '../src/functions';
import type { SetupContext } from '../src/testing';
import { prefixOf, type AuditMismatch, type AuditOutput, type PrefixTotals } from './blob-audit';
import { auditContainerName } from './jobs';

/**
 * Demo data for the `blob-audit` job: a few thousand small blobs over a few prefixes, a known
 * few with a wrong stored Content-MD5 and a known few with none. Everything (names, bytes,
 * which blobs are broken) follows from the seed, so the audit's exact output is known in
 * advance: `expectedAudit` computes it without touching storage.
 */

/** Exactly what the audit job must output for the seeded container. */
export type ExpectedAudit = AuditOutput;

export interface DemoSeedOptions {
  /** Blobs to write. Default 2000. */
  count?: number;
  /** Default 42. */
  seed?: number;
  /** Blobs stored with a Content-MD5 that does not match their bytes. Default 7. */
  corrupt?: number;
  /** Blobs stored with no Content-MD5. Default 5. */
  withoutMd5?: number;
  /** Must match the job's option for the expected output to match. Default 100. */
  maxListedMismatches?: number;
  /** Uploads in flight at once. Default 16. */
  concurrency?: number;
  /** Stops the seeding (no further uploads start). */
  signal?: AbortSignal;
}

type Md5State = 'stored' | 'wrong' | 'none';

interface DemoBlob {
  name: string;
  content: Buffer;
  contentType: string;
  md5: Md5State;
}

/** A small deterministic PRNG (xorshift32 over a mixed seed); not for anything secret. */
function prng(seed: number): () => number {
  let state = Math.imul((seed | 0) ^ 0x5bd1e995, 0x9e3779b1) >>> 0 || 0x1badf00d;
  return () => {
    state ^= state << 13;
    state >>>= 0;
    state ^= state >>> 17;
    state ^= state << 5;
    state >>>= 0;
    return state / 0x1_0000_0000;
  };
}

const KINDS = [
  { weight: 35, name: (seq: string) => `invoices/INV-${seq}.json`, type: 'application/json' },
  { weight: 25, name: (seq: string) => `images/img-${seq}.bin`, type: 'application/octet-stream' },
  { weight: 30, name: (seq: string, month: string) => `logs/2026/${month}/app-${seq}.log`, type: 'text/plain' },
  { weight: 10, name: (seq: string) => `note-${seq}.txt`, type: 'text/plain' },
] as const;
const TOTAL_WEIGHT = KINDS.reduce((sum, kind) => sum + kind.weight, 0);
const TEXT = 'abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 ';

function resolveOptions(options: DemoSeedOptions) {
  const int = (value: number | undefined, fallback: number, option: string, min: number) => {
    const resolved = value ?? fallback;
    if (!Number.isInteger(resolved) || resolved < min) {
      throw new InvalidConfigError(`demoSeed.${option}`, `demo seed: ${option} must be a whole number of at least ${min}`);
    }
    return resolved;
  };
  const resolved = {
    count: int(options.count, 2000, 'count', 1),
    seed: int(options.seed, 42, 'seed', Number.MIN_SAFE_INTEGER),
    corrupt: int(options.corrupt, 7, 'corrupt', 0),
    withoutMd5: int(options.withoutMd5, 5, 'withoutMd5', 0),
    maxListedMismatches: int(options.maxListedMismatches, 100, 'maxListedMismatches', 0),
    concurrency: int(options.concurrency, 16, 'concurrency', 1),
  };
  if (resolved.corrupt + resolved.withoutMd5 > resolved.count) {
    throw new InvalidConfigError('demoSeed.corrupt', 'demo seed: corrupt + withoutMd5 must not exceed count');
  }
  return resolved;
}

/** The blobs the seed describes, in index order. */
function demoBlobs(options: ReturnType<typeof resolveOptions>): DemoBlob[] {
  const random = prng(options.seed);
  const blobs: DemoBlob[] = [];
  for (let index = 0; index < options.count; index++) {
    let pick = random() * TOTAL_WEIGHT;
    const kind = KINDS.find((k) => (pick -= k.weight) < 0) ?? KINDS[KINDS.length - 1]!;
    const month = String(1 + Math.floor(random() * 12)).padStart(2, '0');
    const name = kind.name(String(index).padStart(5, '0'), month);
    const length = 120 + Math.floor(random() * 480);
    const header = `${name}\n`;
    let body = header;
    while (body.length < length) body += TEXT[Math.floor(random() * TEXT.length)];
    blobs.push({ name, content: Buffer.from(body.slice(0, length), 'utf8'), contentType: kind.type, md5: 'stored' });
  }
  // Which blobs are broken: a seeded shuffle of the indexes, from its own stream so the set
  // does not shift when only the counts of broken blobs change.
  const pickRandom = prng(options.seed ^ 0x2545f491);
  const order = blobs.map((_, i) => i);
  for (let i = order.length - 1; i > 0; i--) {
    const j = Math.floor(pickRandom() * (i + 1));
    [order[i], order[j]] = [order[j]!, order[i]!];
  }
  order.slice(0, options.corrupt).forEach((i) => (blobs[i]!.md5 = 'wrong'));
  order.slice(options.corrupt, options.corrupt + options.withoutMd5).forEach((i) => (blobs[i]!.md5 = 'none'));
  return blobs;
}

const md5 = (bytes: Buffer) => createHash('md5').update(bytes).digest();

/** The audit output for the seeded container, computed from the seed alone. */
export function expectedAudit(options: DemoSeedOptions = {}): ExpectedAudit {
  const resolved = resolveOptions(options);
  return expectedFor(demoBlobs(resolved), resolved.maxListedMismatches);
}

function expectedFor(blobs: readonly DemoBlob[], maxListed: number): ExpectedAudit {
  const byPrefix = new Map<string, PrefixTotals>();
  let bytes = 0;
  for (const blob of blobs) {
    const prefix = prefixOf(blob.name);
    const entry = byPrefix.get(prefix) ?? { prefix, count: 0, bytes: 0 };
    entry.count++;
    entry.bytes += blob.content.length;
    byPrefix.set(prefix, entry);
    bytes += blob.content.length;
  }
  const mismatches: AuditMismatch[] = blobs
    .filter((b) => b.md5 === 'wrong')
    .map((b) => ({ name: b.name, reason: 'md5' as const }))
    .sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  return {
    prefixes: [...byPrefix.values()].sort((a, b) => (a.prefix < b.prefix ? -1 : a.prefix > b.prefix ? 1 : 0)),
    blobs: blobs.length,
    bytes,
    withoutMd5: blobs.filter((b) => b.md5 === 'none').length,
    vanished: 0,
    mismatchCount: mismatches.length,
    mismatches: mismatches.slice(0, maxListed),
  };
}

/**
 * Writes one demo blob so that its stored Content-MD5 ends up as the seed says:
 * - `stored`: Put Blob with the true MD5 (the service checks it and stores it).
 * - `wrong`: Put Blob, then Set Blob Properties with the MD5 of other bytes. (Put Blob with a
 *   wrong MD5 is refused with 400, by Azure and Azurite alike; Set Blob Properties stores
 *   the header as given.)
 * - `none`: Put Block + Put Block List with no MD5 header: a blob committed from blocks has
 *   no whole-blob MD5 unless the client sets one.
 * Every path replaces an existing blob whole, so seeding twice gives the same container.
 */
async function writeDemoBlob(container: ContainerClient, blob: DemoBlob): Promise<void> {
  const client = container.getBlockBlobClient(blob.name);
  const trueMd5 = md5(blob.content);
  if (blob.md5 === 'none') {
    const blockId = Buffer.from('block-000000').toString('base64');
    await client.stageBlock(blockId, blob.content, blob.content.length);
    await client.commitBlockList([blockId], { blobHTTPHeaders: { blobContentType: blob.contentType } });
    return;
  }
  await client.upload(blob.content, blob.content.length, {
    blobHTTPHeaders: { blobContentType: blob.contentType, blobContentMD5: trueMd5 },
  });
  if (blob.md5 === 'wrong') {
    // Set Blob Properties replaces every standard header, so the content type goes again.
    await client.setHTTPHeaders({
      blobContentType: blob.contentType,
      blobContentMD5: md5(Buffer.concat([blob.content, Buffer.from('\0corrupted')])),
    });
  }
}

/**
 * Creates the container if needed and writes the demo blobs (bounded concurrency). Returns
 * the audit output expected for them, computed from the seed. The container should hold
 * nothing else, or the audit will count that too.
 */
export async function seedDemoBlobs(container: ContainerClient, options: DemoSeedOptions = {}): Promise<ExpectedAudit> {
  const resolved = resolveOptions(options);
  const blobs = demoBlobs(resolved);
  await container.createIfNotExists({ abortSignal: options.signal });
  let next = 0;
  const lane = async () => {
    while (next < blobs.length) {
      options.signal?.throwIfAborted();
      await writeDemoBlob(container, blobs[next++]!);
    }
  };
  await Promise.all(Array.from({ length: Math.min(resolved.concurrency, blobs.length) }, lane));
  return expectedFor(blobs, resolved.maxListedMismatches);
}

/**
 * `baton start --setup dist/functions/demo-seed.js` (what `npm start` runs): the demo blobs,
 * written into the audit container unless it is there already (a persisted Azurite keeps them).
 */
export async function setup({ env, signal, log }: SetupContext): Promise<void> {
  const name = auditContainerName(env);
  const container = blobServiceClient({ env }).getContainerClient(name);
  if (await container.exists({ abortSignal: signal })) return;
  // Seeding takes seconds; say so, so a quiet start does not look like a hang.
  log(`seeding demo blobs into ${name} (Ctrl-C stops without starting instances)`);
  const expected = await seedDemoBlobs(container, { signal });
  log(`seeded ${expected.blobs} demo blobs into ${name} (${expected.mismatchCount} corrupted)`);
}
