/**
 * What the `--once` cluster files share: reading the run file `--output` writes, the exact
 * report the demo seed predicts, and the line the cluster prints when a run ends.
 */
import { onTestFailed, expect } from 'vitest';
import { readFileSync } from 'node:fs';
import type { RunRecord } from '../../src/hub/run-record';
import { expectedAudit } from '../../functions/demo-seed';
import type { SpawnedProcess } from './cluster-process';

export interface OutputFile {
  record: RunRecord;
  /** The run's output document; the job's own output is its `output`. */
  output: { runId: string; state: string; output: unknown };
}

export function readOutputFile(path: string): OutputFile {
  return JSON.parse(readFileSync(path, 'utf8')) as OutputFile;
}

export function dumpOnFailure(cluster: () => SpawnedProcess | undefined): void {
  onTestFailed(() => {
    const c = cluster();
    if (c) process.stderr.write(`\n${c.dump()}\n`);
  });
}

/** The line the cluster prints when the run it requested ends. */
export const runEnded = (runId: string) =>
  new RegExp(`^run ${runId.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}:? (succeeded|failed|cancelled|timed-out)`);

/** What every passing `--once` run must show: exit 0, the exact audit, all 40 batches counted. */
export function expectExactRun(file: OutputFile): void {
  expect(file.record.state).toBe('succeeded');
  expect(file.output.state).toBe('succeeded');
  expect(file.record.counters).toMatchObject({ planned: 40, succeeded: 40, failed: 0, rejected: 0 });
  // Counts and bytes per prefix, totals, blobs without MD5 and the exact corrupted names.
  const expected = expectedAudit();
  expect(file.output.output).toEqual(expected);
  expect(expected.mismatchCount).toBe(7);
  expect((file.output.output as typeof expected).mismatches.map((m) => m.name)).toEqual(expected.mismatches.map((m) => m.name));
}
