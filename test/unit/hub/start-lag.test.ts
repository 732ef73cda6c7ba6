/**
 * Start lag: every scheduled run says how late it was created after its occurrence and how late
 * its first item was counted, by storage time; telemetry hears each once, from the write that
 * made it true; status, `baton status` and `baton show` show them.
 */
import { describe, expect, it } from 'vitest';
import { renderShow, renderStatus } from '../../../src/cli/format';
import { jobView, runView, showView, statusView } from '../../../src/hub/read-model';
import { jobStateKey, jobStateSchema, type JobState } from '../../../src/hub/job-state';
import { FencedDocuments } from '../../../src/fencing/fenced-documents';
import { firstItemLagMs, isTerminal, newRunRecord, startLagMs, type RunRecord } from '../../../src/hub/run-record';
import type { RunTelemetry } from '../../../src/telemetry/run-telemetry';
import type { RecordedOccurrences } from '../../../src/hub/occurrence-ledger';
import { reconcileJob } from '../../../src/engine/reconcile';
import { defineJob } from '../../../src/jobs/define-job';
import { ForwardingDocumentStore } from '../../support/forwarding-document-store';
import { unitEngine } from '../../support/unit-engine';
import { ConcurrentUpdateError } from '../../../src/errors';
import type { DocumentCallOptions, WriteCondition } from '../../../src/fencing/document-store';
import { buildEngine } from '../../support/engine-harness';
import { memoryPorts } from '../../support/memory-ports';
import { sumJob } from '../../support/sample-jobs';
import { requestRun } from '../../../src/hub/requests';

class RecordingTelemetry implements RunTelemetry {
  started: RunRecord[] = [];
  firstItems: RunRecord[] = [];
  ended: RunRecord[] = [];
  runStarted(record: RunRecord): void {
    this.started.push(record);
  }
  firstItemCounted(record: RunRecord): void {
    this.firstItems.push(record);
  }
  runEnded(record: RunRecord): void {
    this.ended.push(record);
  }
  occurrences: Array<{ job: string } & RecordedOccurrences> = [];
  occurrencesRecorded(job: string, recorded: RecordedOccurrences): void {
    this.occurrences.push({ job, ...recorded });
  }
  itemsFolded(): void {}
  trackOpenRuns(): () => void {
    return () => undefined;
  }
}

describe('start lag', () => {
  it('each scheduled run records its start and first-item lag once, and the job view lists them', async () => {
    const ports = memoryPorts();
    const telemetry = new RecordingTelemetry();
    // Due every second; three items a message, so the first count comes from a checkpoint of several.
    const engine = buildEngine(ports, [sumJob({ items: 12, itemsPerMessage: 3, schedule: '* * * * * *', overlap: 'allow' })], {
      telemetry,
    });
    const stop = engine.startWorkers(2);
    const ended = async () => telemetry.ended.filter((r) => r.trigger === 'schedule' && isTerminal(r.state)).length >= 2;
    try {
      await engine.leadUntil('leader', ended, 60_000);
    } finally {
      await stop();
    }

    const runs = telemetry.ended.filter((r) => r.trigger === 'schedule');
    for (const run of runs) {
      const stored = await engine.readRun(run.runId);
      // Told once, as created: the record it was told of is the one storage holds.
      expect(telemetry.started.filter((r) => r.runId === run.runId)).toEqual([
        expect.objectContaining({ createdAt: stored?.createdAt, occurrence: stored?.occurrence }),
      ]);
      const firsts = telemetry.firstItems.filter((r) => r.runId === run.runId);
      expect(firsts).toHaveLength(1);
      expect(firsts[0]?.firstItemAt).toBe(stored?.firstItemAt);
      const lag = startLagMs(stored!)!;
      expect(lag).toBe(Date.parse(stored!.createdAt) - Date.parse(stored!.occurrence!));
      expect(lag).toBeGreaterThanOrEqual(0);
      const firstLag = firstItemLagMs(stored!)!;
      expect(firstLag).toBeGreaterThanOrEqual(lag);
      expect(Date.parse(stored!.firstItemAt!)).toBeLessThanOrEqual(Date.parse(stored!.endedAt!));
      expect(runView(stored!)).toMatchObject({ startLagMs: lag, firstItemLagMs: firstLag, firstItemAt: stored!.firstItemAt });
    }

    const states = new FencedDocuments<JobState>(ports.docs, { parse: (v) => jobStateSchema.parse(v) });
    const view = jobView((await states.read(jobStateKey('sum')))!.value);
    for (const run of runs) {
      expect(view.occurrences).toContainEqual({
        occurrence: run.occurrence,
        outcome: 'started',
        startLagMs: startLagMs(run),
        runId: run.runId,
        reason: null,
      });
    }
    // Newest first.
    const listed = view.occurrences.map((o) => Date.parse(o.occurrence));
    expect(listed).toEqual([...listed].sort((a, b) => b - a));
  });

  it('each occurrence started, skipped or missed reaches telemetry once, with the skips and misses listed', async () => {
    const START = new Date('2026-01-01T00:00:00.000Z');
    const tick = defineJob<number, number, number>({
      name: 'tick',
      schedule: '*/10 * * * * *',
      overlap: 'skip',
      split: () => [1],
      process: (n) => n,
      aggregate: { initial: () => 0, add: (a, r) => a + r },
    });
    const engine = unitEngine([tick], START);
    const telemetry = new RecordingTelemetry();
    // The first write of each job state is refused once, as a racing leader's would be: the
    // change runs twice and must still be told once.
    let refuse = true;
    const racing = new (class extends ForwardingDocumentStore {
      override write(key: string, body: string, condition: WriteCondition, options?: DocumentCallOptions) {
        if (refuse && key === 'jobs/tick.json' && 'ifMatch' in condition) {
          refuse = false;
          return Promise.reject(new ConcurrentUpdateError(key));
        }
        return super.write(key, body, condition, options);
      }
    })(engine.docs);
    const ctx = { ...engine.ctx, docs: racing, telemetry };
    const reconcile = async () => {
      const { book, term } = engine.book(1);
      return reconcileJob(ctx, term, book, tick);
    };
    await reconcile();
    await engine.clock.advance(11_000);
    expect(await reconcile()).toHaveLength(1); // 00:00:10 starts and stays open
    await engine.clock.advance(10_000);
    expect(await reconcile()).toEqual([]); // 00:00:20 is skipped: 00:00:10 is still open
    const total = (key: 'started' | 'skipped' | 'missed') => telemetry.occurrences.reduce((n, o) => n + o[key], 0);
    expect([total('started'), total('skipped'), total('missed')]).toEqual([1, 1, 0]);
    const events = telemetry.occurrences.flatMap((o) => o.events);
    expect(events).toEqual([expect.objectContaining({ occurrence: '2026-01-01T00:00:20.000Z', outcome: 'skipped' })]);
    expect(events[0]?.reason).toMatch(/^run tick\/2026-01-01T00:00:10.000Z is /);
  });

  it('a run counted by a leader that does not keep firstItemAt gets none later, and is reported at most once', async () => {
    // Every write of a run record loses firstItemAt, as an older version's leader would write it.
    const ports = memoryPorts();
    const older = new (class extends ForwardingDocumentStore {
      override write(key: string, body: string, condition: WriteCondition, options?: DocumentCallOptions) {
        if (!key.endsWith('/run.json')) return super.write(key, body, condition, options);
        const doc = JSON.parse(body) as { value: Record<string, unknown> };
        delete doc.value.firstItemAt;
        return super.write(key, JSON.stringify(doc), condition, options);
      }
    })(ports.docs);
    const telemetry = new RecordingTelemetry();
    const engine = buildEngine({ ...ports, docs: older }, [sumJob({ items: 60, slowMs: 100 })], { telemetry });
    const stop = engine.startWorkers(1);
    const runId = await requestRun(older, 'sum');
    try {
      // Short terms, so later checkpoints come from leaders that read the record afresh.
      const elector = engine.elector('leader');
      for (let i = 0; i < 500 && !isTerminal((await engine.readRun(runId))?.state ?? 'planning'); i++) {
        await elector
          .runIfLeader((l) => engine.coordinator.lead(l, { termMs: 150, returnWhenIdle: true }))
          .catch(() => undefined);
      }
    } finally {
      await stop();
    }
    expect((await engine.readRun(runId))?.state).toBe('succeeded');
    expect(telemetry.firstItems.filter((r) => r.runId === runId).length).toBeLessThanOrEqual(1);
    expect((await engine.readRun(runId))?.firstItemAt).toBeNull();
  });

  it('a manual run has no start lag; its first-item lag counts from its creation', () => {
    const manual = newRunRecord({
      runId: 'sum/manual-1',
      job: 'sum',
      trigger: 'manual',
      occurrence: undefined,
      now: new Date('2026-05-01T00:00:00.000Z'),
      timeoutSeconds: 60,
    });
    expect(startLagMs(manual)).toBeNull();
    expect(firstItemLagMs(manual)).toBeNull();
    expect(firstItemLagMs({ ...manual, firstItemAt: '2026-05-01T00:00:01.250Z' })).toBe(1250);
  });

  it("baton status shows each job's last and largest start lag; baton show a run's two lags", () => {
    const now = new Date('2026-05-01T00:01:00.000Z');
    const state: JobState = {
      v: 1,
      job: 'nightly',
      lastChecked: '2026-05-01T00:00:59.000Z',
      active: [],
      recent: [
        { at: '2026-05-01T00:00:10.120Z', occurrence: '2026-05-01T00:00:10.000Z', outcome: 'started', runId: 'nightly/a' },
        { at: '2026-05-01T00:00:22.500Z', occurrence: '2026-05-01T00:00:20.000Z', outcome: 'started', runId: 'nightly/b' },
        { at: '2026-05-01T00:00:31.000Z', occurrence: '2026-05-01T00:00:30.000Z', outcome: 'skipped', reason: 'overlap: skip' },
        { at: '2026-05-01T00:00:40.080Z', occurrence: '2026-05-01T00:00:40.000Z', outcome: 'started', runId: 'nightly/c' },
      ],
      totals: { started: 3, skipped: 1, missed: 0 },
    };
    const status = statusView('baton', 'http://x', {
      leader: undefined,
      lastLeader: undefined,
      restingUntil: undefined,
      leadershipChanges: [],
      activeRuns: [],
      jobs: [state],
    });
    const text = renderStatus(status, now);
    expect(text).toMatch(/START LAG \(LAST, MAX\)/);
    expect(text).toMatch(/nightly .* 80 ms, 2\.5 s/);
    expect(status.jobs[0]?.occurrences.map((o) => [o.outcome, o.startLagMs])).toEqual([
      ['started', 80],
      ['skipped', null],
      ['started', 2500],
      ['started', 120],
    ]);

    const record: RunRecord = {
      ...newRunRecord({
        runId: 'nightly/c',
        job: 'nightly',
        trigger: 'schedule',
        occurrence: new Date('2026-05-01T00:00:40.000Z'),
        now: new Date('2026-05-01T00:00:40.080Z'),
        timeoutSeconds: 60,
      }),
      firstItemAt: '2026-05-01T00:00:41.300Z',
    };
    expect(renderShow(showView('baton', 'baton-runs', { record, output: undefined, manifest: undefined }), now)).toMatch(
      /^lag +start 80 ms after its occurrence; first item counted 1\.3 s after it$/m,
    );
  });
});
