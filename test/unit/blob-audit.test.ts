import { finalizeContext } from '../../src/hub/finalize-context';
import { runKeys } from '../../src/hub/run-record';
import { ContainerClient } from '@azure/storage-blob';
import { describe, expect, it } from 'vitest';
import { InvalidConfigError } from '../../src/errors';
import { InMemoryDocumentStore } from '../../src/fencing/in-memory-document-store';
import {
  addPartial,
  AUDIT_REPORT,
  createBlobAuditJob,
  emptyAudit,
  mergeAudits,
  prefixOf,
  renderAuditReport,
  type AuditOutput,
  type AuditPartial,
} from '../../functions/blob-audit';
import { expectedAudit } from '../../functions/demo-seed';
import { shuffled } from '../support/unit-engine';

// Never contacted: the fold and finalize do not touch the target.
const target = new ContainerClient('http://127.0.0.1:1/devstoreaccount1/unused');

function job(maxListedMismatches?: number) {
  return createBlobAuditJob({ target, ...(maxListedMismatches === undefined ? {} : { maxListedMismatches }) });
}

function fold(partials: readonly AuditPartial[], maxListed?: number): AuditOutput {
  const j = job(maxListed);
  const acc = partials.reduce<AuditOutput>((a, p, i) => j.aggregate.add(a, p, { itemIndex: i }), j.aggregate.initial());
  return j.aggregate.output(acc);
}

/** Partial summaries of 30 items: 4 prefixes, some mismatches and some blobs without MD5. */
function partials(): AuditPartial[] {
  const prefixes = ['invoices', 'images', 'logs', '(root)'];
  return Array.from({ length: 30 }, (_, i) => ({
    prefixes: prefixes
      .filter((_, k) => (i + k) % 3 !== 0)
      .map((prefix, k) => ({ prefix, count: 1 + ((i * 7 + k) % 5), bytes: 100 * (i + 1) + k }))
      .sort((a, b) => (a.prefix < b.prefix ? -1 : 1)),
    withoutMd5: i % 4 === 0 ? 1 : 0,
    vanished: i === 13 ? 2 : 0,
    mismatches:
      i % 3 === 0
        ? [
            { name: `logs/2026/m-${String(99 - i).padStart(3, '0')}.log`, reason: 'md5' as const },
            { name: `images/x-${String(i).padStart(3, '0')}.bin`, reason: i % 2 ? ('length' as const) : ('md5' as const) },
          ]
        : [],
  }));
}

describe('blob-audit fold', () => {
  it('gives the same output, deeply and byte for byte as JSON, in any arrival order', () => {
    const reference = fold(partials());
    expect(reference.blobs).toBe(partials().reduce((s, p) => s + p.prefixes.reduce((t, e) => t + e.count, 0), 0));
    expect(reference.mismatchCount).toBe(20);
    expect(reference.withoutMd5).toBe(8);
    expect(reference.vanished).toBe(2);
    expect(reference.prefixes.map((p) => p.prefix)).toEqual(['(root)', 'images', 'invoices', 'logs']);
    for (const seed of [1, 2, 3, 4, 5, 6, 7, 8]) {
      const again = fold(shuffled(partials(), seed));
      expect(again).toEqual(reference);
      expect(JSON.stringify(again)).toBe(JSON.stringify(reference));
    }
  });

  it('is the same when the accumulator goes through a JSON checkpoint between results', () => {
    const j = job(5);
    let acc = j.aggregate.initial();
    for (const [i, p] of shuffled(partials(), 11).entries()) {
      acc = JSON.parse(JSON.stringify(j.aggregate.add(acc, p, { itemIndex: i }))) as AuditOutput;
    }
    expect(acc).toEqual(fold(partials(), 5));
  });

  it('keeps only the lexicographically smallest names in the bounded list, and counts them all', () => {
    const all = partials().flatMap((p) => p.mismatches.map((m) => m.name));
    const smallest = [...all].sort().slice(0, 5);
    for (const seed of [1, 2, 3]) {
      const out = fold(shuffled(partials(), seed), 5);
      expect(out.mismatches.map((m) => m.name)).toEqual(smallest);
      expect(out.mismatchCount).toBe(all.length);
    }
    expect(fold(partials(), 0).mismatches).toEqual([]);
    expect(fold(partials(), 0).mismatchCount).toBe(all.length);
  });

  it('uses code-unit order, not the locale, for names', () => {
    const out = fold(
      ['b', 'B', 'a', 'Z', 'é'].map((name) => ({
        prefixes: [],
        withoutMd5: 0,
        vanished: 0,
        mismatches: [{ name, reason: 'md5' }],
      })),
      3,
    );
    expect(out.mismatches.map((m) => m.name)).toEqual(['B', 'Z', 'a']);
  });

  it('rejects a bad batch size or list bound at definition time', () => {
    expect(() => createBlobAuditJob({ target, batchSize: 0 })).toThrow(InvalidConfigError);
    expect(() => createBlobAuditJob({ target, maxListedMismatches: 1.5 })).toThrow(InvalidConfigError);
    expect(() => createBlobAuditJob({ target, name: 'Bad Name' })).toThrow(InvalidConfigError);
  });
});

describe('prefixOf', () => {
  it.each([
    ['invoices/INV-1.json', 'invoices'],
    ['logs/2026/01/a.log', 'logs'],
    ['note.txt', '(root)'],
    ['/leading-slash', '(root)'],
  ])('%s → %s', (name, prefix) => expect(prefixOf(name)).toBe(prefix));
});

describe('renderAuditReport', () => {
  const output: AuditOutput = {
    prefixes: [
      { prefix: '(root)', count: 3, bytes: 900 },
      { prefix: 'images', count: 10, bytes: 4096 },
      { prefix: 'odd|name', count: 1, bytes: 5 },
    ],
    blobs: 14,
    bytes: 5001,
    withoutMd5: 2,
    vanished: 0,
    mismatchCount: 3,
    mismatches: [
      { name: 'images/a.bin', reason: 'md5' },
      { name: 'images/b`tick.bin', reason: 'length' },
    ],
  };

  it('has a title, a row per prefix, the totals, the listed mismatches and the MD5-less count', () => {
    const md = renderAuditReport(output, 'blob-audit/manual-1');
    expect(md).toMatch(/^# Blob audit report/);
    expect(md).toContain('blob-audit/manual-1');
    expect(md).toContain('| `(root)` | 3 | 900 |');
    expect(md).toContain('| `images` | 10 | 4,096 |');
    expect(md).toContain('| `odd\\|name` | 1 | 5 |');
    expect(md).toContain('| **Total** | **14** | **5,001** |');
    expect(md).toContain('- `images/a.bin`: content does not match the stored Content-MD5');
    expect(md).toContain('- ``images/b`tick.bin``: length differs from Content-Length');
    expect(md).toContain('Mismatches: 3');
    expect(md).toContain('…and 1 more not listed');
    expect(md).toMatch(/## Blobs without MD5\n\n2 blob\(s\) have no stored Content-MD5/);
  });

  it('says so when there is nothing wrong, and when batches failed', () => {
    const clean = { ...output, withoutMd5: 0, mismatchCount: 0, mismatches: [] };
    const md = renderAuditReport(clean, 'r', { state: 'failed', counters: { planned: 40, succeeded: 38, failed: 2 } });
    expect(md).toContain('None: every blob with a stored MD5 matches it');
    expect(md).toContain('None: every blob has a stored Content-MD5.');
    expect(md).toContain('**Incomplete:** 2 of 40 batches could not be audited');
  });
});

describe('blob-audit finalize', () => {
  it('attaches report.md to the run once; a repeated finalize is harmless', async () => {
    const docs = new InMemoryDocumentStore();
    const j = job(undefined);
    const output = expectedAudit({ count: 300 });
    const runId = 'blob-audit/manual-abc';
    const ctx = finalizeContext(docs, runId, 'succeeded', { planned: 6, succeeded: 6, failed: 0 }, new AbortController().signal);
    await j.finalize?.(output, ctx);
    await j.finalize?.(output, ctx);
    expect(docs.keys()).toEqual([`runs/blob-audit/manual-abc/attachments/${AUDIT_REPORT}`]);
    const md = (await docs.read(runKeys.attachment(runId, AUDIT_REPORT)))?.body ?? '';
    for (const m of output.mismatches) expect(md).toContain(`\`${m.name}\``);
  });
});

describe('expectedAudit', () => {
  it('is determined by the seed, and adds up', () => {
    const a = expectedAudit();
    expect(expectedAudit()).toEqual(a);
    expect(expectedAudit({ seed: 7 })).not.toEqual(a);
    expect(a.blobs).toBe(2000);
    expect(a.prefixes.map((p) => p.prefix)).toEqual(['(root)', 'images', 'invoices', 'logs']);
    expect(a.prefixes.reduce((s, p) => s + p.count, 0)).toBe(2000);
    expect(a.prefixes.reduce((s, p) => s + p.bytes, 0)).toBe(a.bytes);
    expect(a.mismatchCount).toBe(7);
    expect(a.mismatches).toHaveLength(7);
    expect(new Set(a.mismatches.map((m) => m.name)).size).toBe(7);
    expect(a.withoutMd5).toBe(5);
    expect(a.bytes / a.blobs).toBeGreaterThan(100);
    expect(a.bytes / a.blobs).toBeLessThan(1000);
    expect(expectedAudit({ maxListedMismatches: 3 }).mismatches).toEqual(a.mismatches.slice(0, 3));
  });

  it('refuses more broken blobs than blobs', () => {
    expect(() => expectedAudit({ count: 10, corrupt: 6, withoutMd5: 5 })).toThrow(InvalidConfigError);
  });
});

describe('merging two audits (the durable engine folds chunks apart)', () => {
  it('gives what folding every partial into one audit gives, whatever the split', () => {
    const partials: AuditPartial[] = Array.from({ length: 12 }, (_, i) => ({
      prefixes: [{ prefix: `p${i % 3}/`, count: i + 1, bytes: 10 * (i + 1) }],
      withoutMd5: i % 2,
      vanished: i % 5 === 0 ? 1 : 0,
      mismatches: i % 4 === 0 ? [{ name: `p${i % 3}/blob-${i}`, reason: 'md5' as const }] : [],
    }));
    const foldAll = (list: AuditPartial[]) => list.reduce<AuditOutput>((acc, p) => addPartial(acc, p, 2), emptyAudit());
    const whole = foldAll(partials);
    for (const cut of [0, 1, 5, 11, 12]) {
      expect(mergeAudits(foldAll(partials.slice(0, cut)), foldAll(partials.slice(cut)), 2)).toEqual(whole);
    }
    expect(whole.mismatchCount).toBe(3);
    expect(whole.mismatches).toHaveLength(2);
  });
});
