import { describe, expect, it } from 'vitest';
import type { AuditEntry } from '../../src/chaos/audit-trail';
import {
  checkEpochOrder,
  checkInvariants,
  type CheckedRun,
  type CheckInput,
  type InvariantRule,
} from '../../src/chaos/invariants';
import { newRunRecord, transition, type RunRecord } from '../../src/runs/run-record';
import { expectedSynthetic } from '../../src/sample/synthetic-job';

const SPEC = { name: 'sum', items: 10, failEvery: 4 };
const EXPECTED = expectedSynthetic(SPEC);
const expectations = new Map([['sum', { planned: 10, output: EXPECTED.output, failed: EXPECTED.failed }]]);
const T0 = Date.parse('2026-11-21T10:00:00.000Z');

/** A run of SPEC that ended well: 8 succeeded, items 3 and 7 failed by design. */
function goodRun(occurrenceSeconds = 0, overrides: Partial<RunRecord> = {}): CheckedRun {
  const occurrence = new Date(T0 + occurrenceSeconds * 1000);
  const created = newRunRecord({
    runId: `sum/${occurrence.toISOString()}`,
    job: 'sum',
    trigger: 'schedule',
    occurrence,
    now: occurrence,
    timeoutSeconds: 60,
  });
  const counters = { planned: 10, dispatched: 10, succeeded: 8, failed: 2, duplicates: 0, rejected: 0 };
  let record: RunRecord = { ...created, counters };
  for (const state of ['dispatching', 'running', 'finalizing', 'succeeded'] as const) {
    record = transition(record, state, new Date(occurrence.getTime() + 5000));
  }
  record = { ...record, ...overrides };
  return {
    record,
    output: {
      runId: record.runId,
      job: 'sum',
      occurrence: record.occurrence,
      state: 'succeeded',
      counters,
      output: EXPECTED.output,
    },
    manifest: {
      runId: record.runId,
      state: 'succeeded',
      failed: EXPECTED.failed.map((item) => ({ item, reason: 'by design', attempts: 3 })),
      missing: [],
      missingCount: 0,
    },
  };
}

const write = (
  at: number,
  epoch: number,
  etag: string,
  condition: Partial<AuditEntry>,
  key = 'runs/sum/x/run.json',
): AuditEntry => ({
  at,
  key,
  status: 201,
  etag,
  epoch,
  ...condition,
});

/** The audit trail of a run record's create and one replacement, ending at the run's stored version. */
function auditOf(run: CheckedRun): AuditEntry[] {
  const key = `runs/${run.record.runId}/run.json`;
  run.etag = `"${run.record.runId}-2"`;
  return [
    { at: T0 + 1, key, status: 201, ifNoneMatch: '*', etag: `"${run.record.runId}-1"`, epoch: 1 },
    { at: T0 + 2, key, status: 201, ifMatch: `"${run.record.runId}-1"`, etag: run.etag, epoch: 1 },
  ];
}

function rulesOf(input: Partial<CheckInput>): InvariantRule[] {
  const result = checkInvariants({ runs: [], leftovers: [], expectations, ...input });
  return result.violations.map((v) => v.rule);
}

describe('the invariant checker', () => {
  it('finds nothing wrong with runs that ended as they should', () => {
    const runs = [goodRun(0), goodRun(20)];
    const result = checkInvariants({
      runs,
      leftovers: [],
      expectations: new Map([['sum', { ...expectations.get('sum')!, state: 'succeeded' as const }]]),
      audit: runs.flatMap(auditOf),
      faultsStoppedAt: T0,
    });
    expect(result.violations).toEqual([]);
    expect(result.runsChecked).toBe(2);
    expect(result.states).toEqual({ succeeded: 2 });
    expect(result.audit).toMatchObject({ writes: 4, accepted: 4, refused: 0, documents: 2 });
  });

  it('needs every version of a run record in the audit trail, unless a write whose answer was lost accounts for it', () => {
    const run = goodRun(0);
    const [create] = auditOf(run);
    // Storage holds a version no audited write made: the order checks could not see it.
    expect(rulesOf({ runs: [run], audit: [create!] })).toEqual(['audit-complete']);
    const lost: AuditEntry = { at: T0 + 3, key: create!.key, status: 0, ifMatch: create!.etag, epoch: 1 };
    const result = checkInvariants({ runs: [run], leftovers: [], expectations, audit: [create!, lost] });
    expect(result.violations).toEqual([]);
    expect(result.notes.join('\n')).toMatch(/1 version\(s\) of run records came from writes whose answer storage never gave/);
  });

  it('does not count duplicates folded after the output was written against it', () => {
    const run = goodRun(0);
    const later = { ...run, record: { ...run.record, counters: { ...run.record.counters, duplicates: 3 } } };
    expect(rulesOf({ runs: [later] })).toEqual([]);
  });

  it('judges a run still open before its bound later, not now', () => {
    const open = { record: { ...goodRun(0).record, state: 'running' as const, endedAt: null } };
    const result = checkInvariants({ runs: [open], leftovers: [], expectations, now: T0 + 10_000 });
    expect(result.violations).toEqual([]);
    expect(result.notes.join('\n')).toMatch(/1 run\(s\) still open within their timeout/);
  });

  const broken = goodRun(0);
  it.each<[string, Partial<CheckInput>, InvariantRule]>([
    [
      'a wrong output',
      { runs: [{ ...broken, output: { ...broken.output!, output: { count: 8, sum: 1, squares: 0 } } }] },
      'output-correct',
    ],
    [
      'counters that do not add up',
      { runs: [goodRun(0, { counters: { ...broken.record.counters, succeeded: 7 } })] },
      'counts-add-up',
    ],
    [
      'a failed item that never fails by design',
      {
        runs: [
          {
            ...broken,
            manifest: {
              ...broken.manifest!,
              failed: [
                { item: 3, reason: 'x', attempts: 3 },
                { item: 5, reason: 'x', attempts: 3 },
              ],
            },
          },
        ],
      },
      'counts-add-up',
    ],
    [
      'an item that always fails, missing from the failures',
      {
        runs: [goodRun(0, { counters: { ...broken.record.counters, succeeded: 9, failed: 1 } })].map((r) => ({
          ...r,
          output: { ...r.output!, counters: r.record.counters },
          manifest: { ...r.manifest!, failed: [{ item: 3, reason: 'x', attempts: 3 }] },
        })),
      },
      'counts-add-up',
    ],
    ['a succeeded run without an output', { runs: [{ record: broken.record, manifest: broken.manifest! }] }, 'one-output'],
    [
      'two accepted output writes',
      {
        runs: [broken],
        audit: [0, 1].map((i) => ({ at: T0 + i, key: `runs/${broken.record.runId}/output.json`, status: 201, ifNoneMatch: '*' })),
      },
      'one-output',
    ],
    [
      'two runs of one occurrence',
      { runs: [broken, { ...broken, record: { ...broken.record, runId: `${broken.record.runId}-again` } }] },
      'one-run-per-occurrence',
    ],
    [
      'a run record created twice',
      {
        runs: [broken],
        audit: [0, 1].map((i) => write(T0 + i, 1, `"${i}"`, { ifNoneMatch: '*' }, `runs/${broken.record.runId}/run.json`)),
      },
      'one-run-per-occurrence',
    ],
    [
      'a stale epoch accepted after a newer one',
      { audit: [write(T0 + 1, 2, '"a"', { ifNoneMatch: '*' }), write(T0 + 2, 1, '"b"', { ifMatch: '"a"' })] },
      'epoch-order',
    ],
    ['a write to a fenced document with no condition', { audit: [write(T0 + 1, 1, '"a"', {})] }, 'conditional-writes'],
    [
      'a message left for an ended run',
      { runs: [broken], leftovers: [{ queue: 'h-results', id: 'm1', run: broken.record.runId }] },
      'queues-drained',
    ],
    [
      'a run still open at the end',
      { runs: [{ record: { ...broken.record, state: 'running', endedAt: null } }] },
      'terminal-in-time',
    ],
    [
      'a run that ended later than its timeout (60 s) and the grace (15 s) after the faults stopped',
      { runs: [goodRun(0, { endedAt: new Date(T0 + 76_000).toISOString() })], faultsStoppedAt: T0 },
      'terminal-in-time',
    ],
  ])('reports %s', (_name, input, rule) => {
    expect(rulesOf(input)).toContain(rule);
  });

  it('lets a timed-out run account for its missing items, but not count a failure that never fails by design', () => {
    const timedOut = (failed: number[]): CheckedRun => {
      const base = goodRun(0);
      const counters = { ...base.record.counters, succeeded: 5, failed: failed.length };
      return {
        record: { ...base.record, state: 'timed-out', counters },
        manifest: {
          runId: base.record.runId,
          state: 'timed-out',
          failed: failed.map((item) => ({ item, reason: 'x', attempts: 3 })),
          missing: [],
          missingCount: 10 - 5 - failed.length,
        },
      };
    };
    expect(rulesOf({ runs: [timedOut([3])] })).toEqual([]);
    expect(rulesOf({ runs: [timedOut([3, 4])] })).toEqual(['counts-add-up']);
  });

  it('ignores leftovers of open runs and notes those that name no run', () => {
    const open = { record: { ...goodRun(0).record, state: 'running' as const, endedAt: null } };
    const result = checkInvariants({
      runs: [open],
      leftovers: [
        { queue: 'h-work', id: 'a', run: open.record.runId },
        { queue: 'h-work', id: 'b' },
      ],
      expectations,
    });
    expect(result.violations.map((v) => v.rule)).toEqual(['terminal-in-time']);
    expect(result.notes.join('\n')).toContain('1 message(s) left on the queues name no known run');
  });

  it('says what it could not check without an audit trail or an expectation', () => {
    const other = goodRun(0);
    const result = checkInvariants({
      runs: [{ ...other, record: { ...other.record, job: 'other' } }],
      leftovers: [],
      expectations,
    });
    expect(result.audit).toBeUndefined();
    expect(result.notes.join('\n')).toMatch(/no audit trail/);
    expect(result.notes.join('\n')).toMatch(/no expected output for job\(s\) other/);
  });
});

describe('the write order of one document', () => {
  it('follows the If-Match chain where the times storage answered disagree with it', () => {
    // Storage applied a(1) → b(2) → c(2), but the proxy saw b's answer last.
    const audit = [
      write(T0 + 1, 1, '"a"', { ifNoneMatch: '*' }),
      write(T0 + 9, 2, '"b"', { ifMatch: '"a"' }),
      write(T0 + 5, 2, '"c"', { ifMatch: '"b"' }),
    ];
    expect(checkEpochOrder(audit)).toEqual([]);
  });

  it('places writes the chain cannot reach by time, and still catches a regression among them', () => {
    const audit = [
      write(T0 + 1, 3, '"a"', { ifNoneMatch: '*' }),
      write(T0 + 2, 3, '"b"', { ifMatch: '"a"' }),
      write(T0 + 3, 2, '"x"', { ifMatch: '"unknown"' }),
    ];
    const found = checkEpochOrder(audit);
    expect(found).toHaveLength(1);
    expect(found[0]?.evidence).toMatch(/^epoch 2 .* accepted after epoch 3/);
  });

  it('ignores refused writes', () => {
    const audit = [
      write(T0 + 1, 3, '"a"', { ifNoneMatch: '*' }),
      { ...write(T0 + 2, 1, '"b"', { ifMatch: '"a"' }), status: 412 },
    ];
    expect(checkEpochOrder(audit)).toEqual([]);
  });
});
