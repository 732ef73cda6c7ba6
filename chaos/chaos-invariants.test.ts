import { describe, expect, it } from 'vitest';
import { runIndexEntries } from '../src/hub/run-index';
import type { AuditEntry } from './audit-trail';
import { faultExpectations, HUNG_HOOK_EFFECT, type FaultTarget } from './fault-effects';
import {
  checkDeploys,
  DEPLOY_TAKEOVER_MS,
  checkEpochOrder,
  checkFrozenTimers,
  checkInvariants,
  checkStragglers,
  checkTerms,
  type CheckedRun,
  type CheckInput,
  type InvariantRule,
  type StragglerInput,
} from './invariants';
import { newRunRecord, transition, type RunRecord } from '../src/hub/run-record';
import { expectedSynthetic, type SyntheticJobSpec } from '../functions/synthetic-job';
import { InMemoryDocumentStore } from '../src/fencing/in-memory-document-store';
import { appendFailures } from '../src/hub/failure-log';
import { readFailures } from '../src/hub/failures-manifest';
import type { FailuresManifest } from '../src/hub/run-output';

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
      failedCount: EXPECTED.failed.length,
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

async function rulesOf(input: Partial<CheckInput>): Promise<InvariantRule[]> {
  const result = await checkInvariants({ runs: [], leftovers: [], expectations, ...input });
  return result.violations.map((v) => v.rule);
}

describe('the invariant checker', () => {
  it('finds nothing wrong with runs that ended as they should', async () => {
    const runs = [goodRun(0), goodRun(20)];
    const result = await checkInvariants({
      runs,
      leftovers: [],
      expectations: new Map([['sum', { ...expectations.get('sum')!, state: 'succeeded' as const }]]),
      audit: runs.flatMap(auditOf),
      indexEntries: new Set(runs.flatMap((r) => runIndexEntries(r.record))),
      faultsStoppedAt: T0,
    });
    expect(result.violations).toEqual([]);
    expect(result.runsChecked).toBe(2);
    expect(result.states).toEqual({ succeeded: 2 });
    expect(result.audit).toMatchObject({ writes: 4, accepted: 4, refused: 0, documents: 2 });
  });

  it('needs every version of a run record in the audit trail, unless a write whose answer was lost accounts for it', async () => {
    const run = goodRun(0);
    const [create] = auditOf(run);
    // Storage holds a version no audited write made: the order checks could not see it.
    expect(await rulesOf({ runs: [run], audit: [create!] })).toEqual(['audit-complete']);
    const lost: AuditEntry = { at: T0 + 3, key: create!.key, status: 0, ifMatch: create!.etag, epoch: 1 };
    const result = await checkInvariants({ runs: [run], leftovers: [], expectations, audit: [create!, lost] });
    expect(result.violations).toEqual([]);
    expect(result.notes.join('\n')).toMatch(/1 version\(s\) of run records came from writes whose answer storage never gave/);
  });

  it('does not count duplicates folded after the output was written against it', async () => {
    const run = goodRun(0);
    const later = { ...run, record: { ...run.record, counters: { ...run.record.counters, duplicates: 3 } } };
    expect(await rulesOf({ runs: [later] })).toEqual([]);
  });

  it('judges a run still open before its bound later, not now', async () => {
    const open = { record: { ...goodRun(0).record, state: 'running' as const, endedAt: null } };
    const result = await checkInvariants({ runs: [open], leftovers: [], expectations, now: T0 + 10_000 });
    expect(result.violations).toEqual([]);
    expect(result.notes.join('\n')).toMatch(/1 run\(s\) still open within their timeout/);
  });

  const broken = goodRun(0);
  it.each<[string, Partial<CheckInput>, InvariantRule]>([
    [
      'two runs named by one idempotency key',
      { runs: [goodRun(0)], keyedTriggers: [{ key: 'k', runs: [goodRun(0).record.runId, 'sum/manual-other'] }] },
      'one-run-per-key',
    ],
    [
      'a keyed trigger whose run was never created',
      { runs: [goodRun(0)], keyedTriggers: [{ key: 'k', runs: ['sum/manual-k-never'] }] },
      'one-run-per-key',
    ],
    [
      "a run missing from its job's index",
      { runs: [goodRun(0)], indexEntries: new Set([runIndexEntries(goodRun(0).record)[0]!]) },
      'run-indexed',
    ],
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
      'a run whose messages a stopped worker held, ended after the worker came back',
      {
        runs: [goodRun(0)],
        stragglers: {
          hits: [{ instance: 'i', runs: [goodRun(0).record.runId], stoppedAt: T0 + 1000, resumedAt: T0 + 4000 }],
          from: T0,
          to: T0 + 60_000,
          faults: [],
          aimed: new Set(),
          hedgeWaitMs: new Map([['sum', 5000]]),
        },
      },
      'straggler-makespan',
    ],
    [
      'a run that ended later than its timeout (60 s) and the grace (15 s) after the faults stopped',
      { runs: [goodRun(0, { endedAt: new Date(T0 + 76_000).toISOString() })], faultsStoppedAt: T0 },
      'terminal-in-time',
    ],
  ])('reports %s', async (_name, input, rule) => {
    expect(await rulesOf(input)).toContain(rule);
  });

  it('lets a timed-out run account for its missing items, but not count a failure that never fails by design', async () => {
    const timedOut = (failed: number[]): CheckedRun => {
      const base = goodRun(0);
      const counters = { ...base.record.counters, succeeded: 5, failed: failed.length };
      return {
        record: { ...base.record, state: 'timed-out', counters },
        manifest: {
          runId: base.record.runId,
          state: 'timed-out',
          failedCount: failed.length,
          failed: failed.map((item) => ({ item, reason: 'x', attempts: 3 })),
          missing: [],
          missingCount: 10 - 5 - failed.length,
        },
      };
    };
    expect(await rulesOf({ runs: [timedOut([3])] })).toEqual([]);
    expect(await rulesOf({ runs: [timedOut([3, 4])] })).toEqual(['counts-add-up']);
  });

  it('reads failures from the failure log a manifest names, and reports a part storage lost or an item listed twice', async () => {
    const docs = new InMemoryDocumentStore();
    const run = goodRun(0);
    const runId = run.record.runId;
    const entry = (item: number) => ({ item, reason: 'by design', attempts: 3 });
    const logOf = async (parts: number[][]) => {
      let roots: string[] = [];
      for (const items of parts) roots = await appendFailures(docs, { runId, epoch: 1, roots, failures: items.map(entry) });
      return roots;
    };
    const withLog = (failureParts: string[]): CheckedRun => ({
      ...run,
      manifest: { runId, state: 'succeeded', failedCount: 2, failureParts, missing: [], missingCount: 0 },
    });
    const failuresOf = (manifest: FailuresManifest, onMissing: (key: string) => void) =>
      readFailures(docs, manifest, { onMissing });
    const violations = async (checked: CheckedRun) =>
      (await checkInvariants({ runs: [checked], leftovers: [], expectations, failuresOf })).violations;

    expect(await violations(withLog(await logOf([[3], [7]])))).toEqual([]);
    const lost = await logOf([[3], [7]]);
    await docs.delete(lost[1]!);
    expect(await violations(withLog(lost))).toEqual([
      { rule: 'readable', subject: runId, evidence: `the manifest names ${lost[1]}, which storage no longer has` },
      { rule: 'counts-add-up', subject: runId, evidence: 'the manifest lists 1 failed items, the counters 2' },
      { rule: 'counts-add-up', subject: runId, evidence: 'items that always fail are not listed as failed: 7' },
    ]);
    expect((await violations(withLog(await logOf([[3], [7, 3]])))).map((v) => v.evidence)).toEqual([
      'the manifest lists 3 failed items, the counters 2',
      'the manifest says 2 items failed and lists 3',
    ]);
  });

  it('ignores leftovers of open runs and notes those that name no run', async () => {
    const open = { record: { ...goodRun(0).record, state: 'running' as const, endedAt: null } };
    const result = await checkInvariants({
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

  it('says what it could not check without an audit trail or an expectation', async () => {
    const other = goodRun(0);
    const result = await checkInvariants({
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

describe('the terms of leadership', () => {
  const term = (holder: string, epoch: number, at: number, raisedTo?: number) => ({
    holder,
    epoch,
    at: T0 + at,
    ...(raisedTo === undefined ? {} : { raisedTo }),
  });
  const rules = (terms: ReturnType<typeof term>[], deletions: number[] = []) =>
    checkTerms(
      terms,
      deletions.map((d) => T0 + d),
    );

  it('accept epochs that only go up, however far apart, in the order taken', () => {
    expect(rules([term('a', 1, 0), term('b', 2, 20_000), term('a', 7, 40_000)])).toEqual([]);
    expect(rules([term('b', 2, 20_000), term('a', 1, 0)])).toEqual([]);
  });

  it('report an epoch taken twice, or lower than one led with before, when the lease record was not deleted', () => {
    const again = rules([term('a', 3, 0), term('b', 3, 20_000)]);
    expect(again.map((v) => v.rule)).toEqual(['epoch-monotonic']);
    expect(again[0]?.evidence).toMatch(
      /^b took epoch 3 at .*, after a had led with epoch 3 .* and the lease record was not deleted/,
    );
    // Led with a raised epoch: the next term must take one above it.
    expect(rules([term('a', 1, 0, 6), term('b', 2, 20_000)]).map((v) => v.subject)).toEqual(['epoch 2']);
  });

  it('accept terms above every epoch led with before, across a deleted lease record', () => {
    // Deleted under a (epoch 5); the mark keeps the count, so b takes 6 and c 7.
    expect(rules([term('x', 4, 0), term('a', 5, 10_000), term('b', 6, 25_000), term('c', 7, 45_000)], [20_000])).toEqual([]);
    // b raised above a document's stored epoch; c takes one above the raise.
    expect(rules([term('a', 5, 10_000), term('b', 6, 25_000, 9), term('c', 10, 30_000)], [20_000])).toEqual([]);
  });

  it('report a term that restarts the count after the lease record was deleted, even one that raises later', () => {
    // Deleted while the first term led: the next took epoch 1 again (the soak's case).
    const reused = rules([term('a', 1, 0), term('b', 1, 25_000), term('c', 2, 45_000)], [20_000]);
    expect(reused.map((v) => v.subject)).toEqual(['epoch 1']);
    expect(reused[0]?.evidence).toMatch(
      /^b took epoch 1 at .*, after a had led with epoch 1 .*, and the lease record was deleted in between \(at .*\): the epoch mark did not keep the count$/,
    );
    // Refused by a stored 5 and raised to 6: still a restart, and two terms shared epochs below.
    const raised = rules([term('a', 5, 10_000), term('b', 1, 25_000, 6), term('c', 7, 45_000)], [20_000]);
    expect(raised.map((v) => v.subject)).toEqual(['epoch 1']);
  });

  it('are part of the check when given, and noted as unchecked when not', async () => {
    expect(await rulesOf({ terms: [term('a', 4, 0), term('b', 1, 1000)] })).toEqual(['epoch-monotonic']);
    expect(await rulesOf({ terms: [term('a', 4, 0), term('b', 5, 1000)], leaseDeletions: [T0 + 500] })).toEqual([]);
    expect(await rulesOf({ terms: [term('a', 4, 0), term('b', 1, 1000, 5)], leaseDeletions: [T0 + 500] })).toEqual([
      'epoch-monotonic',
    ]);
    expect((await checkInvariants({ runs: [], leftovers: [], expectations })).notes.join('\n')).toMatch(
      /epoch-monotonic was not checked/,
    );
  });
});

describe('the effects of faults aimed at one run', () => {
  // A soak job, with the occurrences of goodRun(): items 3 and 7 fail by design.
  const JOB: SyntheticJobSpec = { name: 'sum', items: 10, failEvery: 4, failureTolerance: { percent: 30 } };
  const runAt = (seconds: number) => `sum/${new Date(T0 + seconds * 1000).toISOString()}`;
  const byDesign = (item: number) => `Error: synthetic item ${item} fails by design`;
  const soakJobs = new Map([
    ['sum', { ...expectedSynthetic(JOB), planned: 10, state: 'succeeded' as const, finalizeError: null }],
  ]);
  const check = async (runs: CheckedRun[], targets: FaultTarget[], disturbed: Array<{ from: number; to: number }> = []) =>
    (
      await checkInvariants({
        runs,
        leftovers: [],
        expectations: soakJobs,
        runExpectations: faultExpectations([JOB], targets, new Map(runs.map((r) => [r.record.runId, r.record])), disturbed),
      })
    ).violations;
  /** goodRun(0), its failures with the given reasons, and `extra` failed too (counts, output and manifest agree). */
  const ended = (reasons: Record<number, string>, extra: number[] = []): CheckedRun => {
    const run = goodRun(0);
    const { output, failed } = expectedSynthetic(JOB, extra);
    const counters = { ...run.record.counters, succeeded: 10 - failed.length, failed: failed.length };
    return {
      record: { ...run.record, counters },
      output: { ...run.output!, counters, output },
      manifest: {
        ...run.manifest!,
        failedCount: failed.length,
        failed: failed.map((item) => ({ item, reason: reasons[item] ?? byDesign(item), attempts: 5 })),
      },
    };
  };

  it('a hung process fails its item with the timeout, and nothing else in its run', async () => {
    const hung: FaultTarget = { kind: 'hung-hook', hook: 'process', run: runAt(0), item: 5, started: true };
    const timeout = 'HookTimeoutError: process did not finish within 3 s and ignored its abort signal, so it was abandoned';
    expect(HUNG_HOOK_EFFECT.process.test(timeout)).toBe(true);
    expect(await check([ended({ 5: timeout }, [5])], [hung])).toEqual([]);
    // Failed another way (the poison copy's reason): not what a hung process does.
    const poisoned = await check(
      [ended({ 5: 'no result after 6 deliveries: the worker never finished this message' }, [5])],
      [hung],
    );
    expect(poisoned.map((v) => v.rule)).toEqual(['fault-effect']);
    expect(poisoned[0]?.evidence).toMatch(/^hung process of item 5: item 5 failed with "no result after 6 deliveries/);
    // The item counted as succeeded: the hang did not bite, or was lost.
    expect((await check([ended({})], [hung])).map((v) => v.rule)).toContain('counts-add-up');
    // The same hang on another run: that run must not show it.
    expect((await check([ended({ 5: timeout }, [5])], [{ ...hung, run: runAt(20) }])).map((v) => v.rule)).toContain(
      'counts-add-up',
    );
  });

  it('a hung item whose last delivery a kill, pause or restart cut short may fail through the poison copy instead', async () => {
    const hung: FaultTarget = { kind: 'hung-hook', hook: 'process', run: runAt(0), item: 5, started: true };
    const poisoned = ended({ 5: 'no result after 2 deliveries: the worker never finished this message' }, [5]);
    // goodRun(0) was open from T0 to T0 + 5 s.
    expect(await check([poisoned], [hung], [{ from: T0 + 2000, to: T0 + 2500 }])).toEqual([]);
    expect((await check([poisoned], [hung], [{ from: T0 + 9000, to: T0 + 9500 }])).map((v) => v.rule)).toEqual(['fault-effect']);
    // It must still fail: a success is no documented end for a hung item.
    expect((await check([ended({})], [hung], [{ from: T0 + 2000, to: T0 + 2500 }])).map((v) => v.rule)).toContain(
      'counts-add-up',
    );
  });

  it('a hung split fails its run with the timeout as its reason', async () => {
    const base = goodRun(0);
    const failed: CheckedRun = {
      record: {
        ...transition({ ...base.record, state: 'planning', endedAt: null }, 'failed', new Date(T0 + 9000)),
        counters: { ...base.record.counters, planned: 0, dispatched: 0, succeeded: 0, failed: 0 },
        endReason: 'split timed out 3 times: split gave no item within 3 s and ignored its abort signal, so it was abandoned',
      },
    };
    const hung: FaultTarget = { kind: 'hung-hook', hook: 'split', run: runAt(0), started: true };
    expect(await check([failed], [hung])).toEqual([]);
    expect(
      await check([{ ...failed, record: { ...failed.record, endReason: 'its step failed 5 times in a row' } }], [hung]),
    ).toEqual([
      expect.objectContaining({ rule: 'fault-effect', evidence: expect.stringMatching(/^hung split: ended failed with reason/) }),
    ]);
    // Without the fault, a failed run of a soak job is a violation.
    expect((await check([failed], [])).map((v) => v.rule)).toContain('expected-state');
  });

  it('a hung finalize leaves its run ended as decided, with the error noted; no other run has one', async () => {
    const noted = 'finalize did not finish within 3 s and ignored its abort signal, so it was abandoned';
    const run = goodRun(0);
    const withError = { ...run, record: { ...run.record, finalizeError: noted } };
    const hung: FaultTarget = { kind: 'hung-hook', hook: 'finalize', run: runAt(0), started: true };
    expect(await check([withError], [hung])).toEqual([]);
    expect((await check([run], [hung])).map((v) => v.rule)).toEqual(['fault-effect']);
    expect((await check([withError], [])).map((v) => v.evidence)).toEqual([
      `a finalize error no fault explains: ${JSON.stringify(noted)}`,
    ]);
  });

  it("a worker that died after sending: its result's outcomes count, not the poison copy's", async () => {
    const death: FaultTarget = {
      kind: 'worker-death',
      instance: 'instance-9',
      run: runAt(0),
      first: 2,
      count: 2,
      dequeueCount: 5,
      at: T0,
    };
    expect(await check([ended({})], [death])).toEqual([]);
    const copyWon = await check([ended({ 3: 'no result after 6 deliveries: the worker never finished this message' })], [death]);
    expect(copyWon).toEqual([
      expect.objectContaining({
        rule: 'fault-effect',
        evidence: expect.stringMatching(
          /^instance-9 died after sending the result of items 2\.\.3: item 3 failed with "no result/,
        ),
      }),
    ]);
    // Outside the message, a failure's reason is not this fault's business.
    expect(await check([ended({ 7: 'no result after 6 deliveries: the worker never finished this message' })], [death])).toEqual(
      [],
    );
  });

  it('a hang aimed at an occurrence that never started hits nothing, unless the job had started it', async () => {
    const skipped: FaultTarget = { kind: 'hung-hook', hook: 'split', run: runAt(40), started: false };
    expect(await check([goodRun(0)], [skipped])).toEqual([]);
    expect(await check([goodRun(0)], [{ ...skipped, started: true }])).toEqual([
      { rule: 'fault-effect', subject: runAt(40), evidence: 'a fault was aimed at this run, and it has no run record' },
    ]);
  });

  it('puts two faults on one run together', async () => {
    const timeout = 'HookTimeoutError: process did not finish within 3 s and ignored its abort signal, so it was abandoned';
    const targets: FaultTarget[] = [
      { kind: 'hung-hook', hook: 'process', run: runAt(0), item: 5, started: true },
      { kind: 'worker-death', instance: 'instance-9', run: runAt(0), first: 4, count: 4, dequeueCount: 5, at: T0 },
    ];
    const expected = faultExpectations([JOB], targets, new Map([[runAt(0), goodRun(0).record]])).get(runAt(0));
    expect(expected?.fault).toBe('hung process of item 5; instance-9 died after sending the result of items 4..7');
    expect(await check([ended({ 5: timeout }, [5])], targets)).toEqual([]);
    expect((await check([ended({ 5: timeout, 7: 'no result after 6 deliveries' }, [5])], targets)).map((v) => v.rule)).toEqual([
      'fault-effect',
    ]);
  });
});

describe('rolling deploys', () => {
  const term = (holder: string, version: string, at: number) => ({ holder, epoch: 1, at: T0 + at, version });
  const deploy = (startedAt: number, takeoverAt: number | null) => ({
    version: '2.0.0',
    startedAt: T0 + startedAt,
    takeoverAt: takeoverAt === null ? null : T0 + takeoverAt,
  });
  it.each([
    {
      name: 'a takeover within 2 s, then only the new version',
      terms: [term('b', '2.0.0', 900), term('c', '2.0.0', 30_000)],
      d: deploy(0, 900),
      rules: [],
    },
    {
      name: 'an older version leading before the takeover',
      terms: [term('a', '1.0.0', -5000), term('b', '2.0.0', 1500)],
      d: deploy(0, 1500),
      rules: [],
    },
    {
      name: 'a takeover after 2 s, on a loaded machine: timing is the benchmark’s, not the soak’s',
      terms: [term('b', '2.0.0', 3013)],
      d: deploy(0, 3013),
      rules: [],
    },
    {
      name: 'a takeover after the loose bound',
      terms: [term('b', '2.0.0', DEPLOY_TAKEOVER_MS + 1)],
      d: deploy(0, DEPLOY_TAKEOVER_MS + 1),
      rules: [
        `the new version led ${DEPLOY_TAKEOVER_MS + 1} ms after its first instance started (bound ${DEPLOY_TAKEOVER_MS} ms)`,
      ],
    },
    { name: 'no takeover at all', terms: [], d: deploy(0, null), rules: ['no instance of the new version'] },
    {
      name: 'an older version leading after the takeover',
      terms: [term('b', '2.0.0', 500), term('a', '1.9.9', 60_000)],
      d: deploy(0, 500),
      rules: ['a (version 1.9.9) took epoch'],
    },
  ])('$name', ({ terms, d, rules }) => {
    const found = checkDeploys([d], terms);
    expect(found.map((v) => v.rule)).toEqual(rules.map(() => 'deploy-takeover'));
    rules.forEach((text, i) => expect(found[i]?.evidence).toContain(text));
  });

  it('scales its bound: a slowed-down soak passes a bound of its own', () => {
    const late = deploy(0, 45_000);
    expect(checkDeploys([late], [term('b', '2.0.0', 45_000)])).toHaveLength(1);
    expect(checkDeploys([late], [term('b', '2.0.0', 45_000)], 2 * DEPLOY_TAKEOVER_MS)).toEqual([]);
  });
});

describe('runs with every timer frozen', () => {
  const created = (seconds: number): CheckedRun => {
    const run = goodRun(seconds);
    return { ...run, record: { ...run.record, createdAt: new Date(T0 + seconds * 1000).toISOString() } };
  };
  const window = { from: T0, to: T0 + 120_000 };
  it.each([
    { name: 'runs every 20 s', runs: [10, 30, 50, 70, 90, 110], gaps: 0 },
    { name: 'a gap of exactly a period and 30 s', runs: [50, 100], gaps: 0 },
    { name: 'no run for 60 s in the middle', runs: [10, 30, 90, 110], gaps: 1 },
    { name: 'no run at all', runs: [], gaps: 1 },
    { name: 'runs outside the window do not count', runs: [-10, 130], gaps: 1 },
  ])('$name', ({ runs, gaps }) => {
    const found = checkFrozenTimers(runs.map(created), { windows: [window], periodMs: 20_000 });
    expect(found).toHaveLength(gaps);
    for (const v of found) expect(v.rule).toBe('frozen-timer-ticks');
  });
});

describe('the runs a straggler hit', () => {
  /** A run of `sum` created `at` seconds after T0 that took `seconds`. */
  const tookRun = (at: number, seconds: number, overrides: Partial<RunRecord> = {}): CheckedRun =>
    goodRun(at, { endedAt: new Date(T0 + (at + seconds) * 1000).toISOString(), ...overrides });
  const took = (at: number, seconds: number, overrides: Partial<RunRecord> = {}): RunRecord =>
    tookRun(at, seconds, overrides).record;
  // Three clean runs (4, 5 and 6 s: median 5 s) before the straggler, stopped 1 s into the run at
  // 60 s for 27 s, inside its fault's window; the hedge wait is 5 s, so the bound is 15 s.
  const clean = [took(0, 4), took(20, 5), took(40, 6)];
  const hitAt = 60;
  const input = (overrides: Partial<StragglerInput> = {}): StragglerInput => ({
    hits: [{ instance: 'instance-6', runs: [took(hitAt, 0).runId], stoppedAt: T0 + 61_000, resumedAt: T0 + 88_000 }],
    from: T0,
    to: T0 + 300_000,
    faults: [{ from: T0 + 60_500, to: T0 + 90_000 }],
    aimed: new Set(),
    hedgeWaitMs: new Map([['sum', 5000]]),
    ...overrides,
  });

  it('accepts a run that a copy ended soon, and reports its makespan beside the clean ones', () => {
    const { violations, tally, notes } = checkStragglers([...clean, took(hitAt, 9, { hedges: 2 })], input());
    expect(violations).toEqual([]);
    expect(notes).toEqual([]);
    expect(tally).toEqual([
      {
        run: took(hitAt, 0).runId,
        instance: 'instance-6',
        makespanMs: 9000,
        cleanMs: 5000,
        cleanRuns: 3,
        hedgeWaitMs: 5000,
        boundMs: 15_000,
        stoppedMs: 27_000,
        endedBeforeResumeMs: 19_000,
        hedges: 2,
        duplicates: 0,
      },
    ]);
  });

  it.each([
    { name: 'exactly at its bound', seconds: 15, found: [] },
    {
      name: 'over its bound, before the worker came back',
      seconds: 16,
      found: ['over its bound of 15000 ms: twice the median of 3'],
    },
    {
      name: 'after the worker came back: its return ended the run',
      seconds: 30,
      found: ['the run ended 2000 ms after it was resumed', 'over its bound of 15000 ms'],
    },
  ])('reports a run that ended $name', ({ seconds, found }) => {
    const { violations } = checkStragglers([...clean, took(hitAt, seconds)], input());
    expect(violations.map((v) => v.rule)).toEqual(found.map(() => 'straggler-makespan'));
    found.forEach((text, i) => expect(violations[i]?.evidence).toContain(text));
  });

  it('reports a run still open at the end, or one with no record', () => {
    const open = { ...took(hitAt, 0), state: 'running' as const, endedAt: null };
    expect(checkStragglers([...clean, open], input()).violations[0]?.evidence).toMatch(/still running at the end$/);
    expect(checkStragglers(clean, input()).violations[0]?.evidence).toMatch(/has no run record$/);
  });

  it('counts as clean only succeeded runs of the job, open in the window, during no fault, aimed at by none', () => {
    const unclean = [
      took(100, 40), // during a fault
      took(140, 40), // aimed at
      took(290, 40), // ends after the window
      took(200, 40, { state: 'failed' }),
      { ...took(220, 40), job: 'other' },
    ];
    const found = checkStragglers(
      [...clean, ...unclean, took(hitAt, 9)],
      input({ faults: [...input().faults, { from: T0 + 120_000, to: T0 + 121_000 }], aimed: new Set([unclean[1]!.runId]) }),
    );
    expect(found.tally[0]).toMatchObject({ cleanRuns: 3, cleanMs: 5000, boundMs: 15_000 });
  });

  it('takes the median of the clean runs, so one slow one does not loosen the bound', () => {
    const slowOne = [took(0, 4), took(20, 5), took(40, 30)];
    expect(checkStragglers([...slowOne, took(hitAt, 16)], input()).violations).toHaveLength(1);
    // An even count: the mean of the middle two.
    const four = checkStragglers([...clean, took(100, 8), took(hitAt, 9)], input());
    expect(four.tally[0]).toMatchObject({ cleanRuns: 4, cleanMs: 5500, boundMs: 16_000 });
  });

  it('without hedging allows no wait for a copy', () => {
    const { violations, tally } = checkStragglers([...clean, took(hitAt, 12)], input({ hedgeWaitMs: new Map([['sum', 0]]) }));
    expect(tally[0]?.boundMs).toBe(10_000);
    expect(violations).toHaveLength(1);
  });

  it("checks only the end before the worker's return when the job had no clean run, and says so", () => {
    const alone = checkStragglers([took(hitAt, 20)], input());
    expect(alone.violations).toEqual([]);
    expect(alone.notes.join('\n')).toMatch(/no clean run of sum to bound the makespan of/);
    expect(checkStragglers([took(hitAt, 28)], input()).violations).toHaveLength(1);
  });

  it('are part of the check when given, and reported with it', async () => {
    const runs = [tookRun(0, 4), tookRun(20, 5), tookRun(40, 6), tookRun(hitAt, 9)];
    const result = await checkInvariants({ runs, leftovers: [], expectations, stragglers: input() });
    expect(result.violations).toEqual([]);
    expect(result.stragglers?.[0]).toMatchObject({ makespanMs: 9000, boundMs: 15_000 });
    expect((await checkInvariants({ runs, leftovers: [], expectations })).stragglers).toBeUndefined();
  });
});
