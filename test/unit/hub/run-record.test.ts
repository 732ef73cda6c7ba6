import { describe, expect, it } from 'vitest';
import {
  canTransition,
  isTerminal,
  manualRunId,
  newRunRecord,
  RUN_STATES,
  runKeys,
  runRecordSchema,
  scheduledRunId,
  transition,
  type RunRecord,
  type RunState,
} from '../../../src/hub/run-record';

const T0 = new Date('2026-03-01T12:00:00.000Z');
const T1 = new Date('2026-03-01T12:05:00.000Z');

/** The state machine as the issue states it, written out pair by pair. */
const ALLOWED: Record<RunState, RunState[]> = {
  planning: ['dispatching', 'failed', 'cancelled', 'timed-out'],
  dispatching: ['running', 'failed', 'cancelled', 'timed-out'],
  running: ['finalizing', 'failed', 'cancelled', 'timed-out'],
  finalizing: ['succeeded', 'failed', 'cancelled', 'timed-out'],
  succeeded: [],
  failed: [],
  cancelled: [],
  'timed-out': [],
};

const TERMINAL: RunState[] = ['succeeded', 'failed', 'cancelled', 'timed-out'];

function record(state: RunState = 'planning'): RunRecord {
  const r = newRunRecord({
    runId: 'nightly/2026-03-01T12:00:00.000Z',
    job: 'nightly',
    trigger: 'schedule',
    occurrence: T0,
    now: T0,
    timeoutSeconds: 600,
  });
  return { ...r, state };
}

const pairs = RUN_STATES.flatMap((from) => RUN_STATES.map((to) => [from, to, ALLOWED[from].includes(to)] as const));

describe('run state machine', () => {
  it('lists the eight states', () => {
    expect([...RUN_STATES].sort()).toEqual(
      ['planning', 'dispatching', 'running', 'finalizing', 'succeeded', 'failed', 'cancelled', 'timed-out'].sort(),
    );
  });

  it.each(RUN_STATES.map((s) => [s, TERMINAL.includes(s)] as const))('isTerminal(%s) is %s', (state, terminal) => {
    expect(isTerminal(state)).toBe(terminal);
  });

  it.each(pairs)('canTransition(%s → %s) is %s', (from, to, allowed) => {
    expect(canTransition(from, to)).toBe(allowed);
  });

  it.each(pairs.filter(([, , allowed]) => allowed))('transition %s → %s moves the record', (from, to) => {
    const before = record(from);
    const snapshot = structuredClone(before);
    const after = transition(before, to, T1, to === 'cancelled' ? 'cancelled on request' : undefined);
    expect(after.state).toBe(to);
    expect(after.updatedAt).toBe(T1.toISOString());
    expect(after.createdAt).toBe(T0.toISOString());
    expect(after.endedAt).toBe(isTerminal(to) ? T1.toISOString() : null);
    expect(after.endReason).toBe(to === 'cancelled' ? 'cancelled on request' : null);
    expect(runRecordSchema.parse(after)).toEqual(after);
    // The input is left alone: the caller still holds the version it read.
    expect(before).toEqual(snapshot);
  });

  it.each(pairs.filter(([, , allowed]) => !allowed))('transition %s → %s throws and names both states', (from, to) => {
    const before = record(from);
    expect(() => transition(before, to, T1)).toThrow(
      new Error(`run nightly/2026-03-01T12:00:00.000Z: cannot go from ${from} to ${to}`),
    );
    expect(before.state).toBe(from);
  });

  it('no state goes back to itself, and terminal states go nowhere', () => {
    for (const s of RUN_STATES) expect(canTransition(s, s)).toBe(false);
    for (const from of TERMINAL) for (const to of RUN_STATES) expect(canTransition(from, to)).toBe(false);
  });

  it('walks the forward path to succeeded, keeping an earlier end reason unless a new one is given', () => {
    let r = record('planning');
    r = { ...r, endReason: 'kept' };
    for (const to of ['dispatching', 'running', 'finalizing'] as const) {
      r = transition(r, to, T1);
      expect(r.endedAt).toBeNull();
    }
    r = transition(r, 'succeeded', new Date('2026-03-01T12:06:00.000Z'));
    expect(r).toMatchObject({ state: 'succeeded', endedAt: '2026-03-01T12:06:00.000Z', endReason: 'kept' });
    expect(() => transition(r, 'cancelled', T1)).toThrow(/cannot go from succeeded to cancelled/);
  });
});

describe('newRunRecord', () => {
  it('fills a scheduled record', () => {
    const r = newRunRecord({
      runId: scheduledRunId('nightly', T0),
      job: 'nightly',
      trigger: 'schedule',
      occurrence: T0,
      now: T1,
      timeoutSeconds: 90,
    });
    expect(r).toEqual({
      v: 1,
      runId: 'nightly/2026-03-01T12:00:00.000Z',
      job: 'nightly',
      trigger: 'schedule',
      occurrence: '2026-03-01T12:00:00.000Z',
      state: 'planning',
      createdAt: '2026-03-01T12:05:00.000Z',
      updatedAt: '2026-03-01T12:05:00.000Z',
      deadlineAt: '2026-03-01T12:06:30.000Z',
      endedAt: null,
      counters: { planned: 0, dispatched: 0, succeeded: 0, failed: 0, duplicates: 0, rejected: 0 },
      planEpoch: null,
      planChunks: 0,
      chunkItems: 0,
      messages: 0,
      cursor: 0,
      acc: null,
      seen: null,
      failureParts: [],
      cancelRequested: false,
      endReason: null,
      outputKey: null,
      manifestKey: null,
      finalizeError: null,
      planSegments: [],
      planCursor: 0,
      splitTimeouts: 0,
      hedges: 0,
      outstanding: [],
      ending: null,
      firstItemAt: null,
      dueAt: null,
      pruned: null,
    });
    expect(runRecordSchema.parse(r)).toEqual(r);
  });

  it('fills a manual record with no occurrence', () => {
    const r = newRunRecord({
      runId: manualRunId('nightly', 'abc'),
      job: 'nightly',
      trigger: 'manual',
      occurrence: undefined,
      now: T0,
      timeoutSeconds: 3600,
    });
    expect(r).toMatchObject({ trigger: 'manual', occurrence: null, state: 'planning', deadlineAt: '2026-03-01T13:00:00.000Z' });
    expect(runRecordSchema.safeParse(r).success).toBe(true);
  });

  it('the schema refuses a record with an unknown state or a negative counter', () => {
    const r = record();
    expect(runRecordSchema.safeParse({ ...r, state: 'paused' }).success).toBe(false);
    expect(runRecordSchema.safeParse({ ...r, counters: { ...r.counters, failed: -1 } }).success).toBe(false);
  });
});

describe('run ids', () => {
  it('a scheduled id is the job and the occurrence in ISO', () => {
    expect(scheduledRunId('nightly', T0)).toBe('nightly/2026-03-01T12:00:00.000Z');
  });

  it('the same occurrence always gives the same id; another occurrence or job another id', () => {
    expect(scheduledRunId('nightly', new Date(T0.getTime()))).toBe(scheduledRunId('nightly', T0));
    expect(scheduledRunId('nightly', T1)).not.toBe(scheduledRunId('nightly', T0));
    expect(scheduledRunId('hourly', T0)).not.toBe(scheduledRunId('nightly', T0));
  });

  it('manual ids are distinct from each other and from any scheduled id', () => {
    const a = manualRunId('nightly', 'req-1');
    const b = manualRunId('nightly', 'req-2');
    expect(a).not.toBe(b);
    expect(a.startsWith('nightly/')).toBe(true);
    expect(a).not.toBe(scheduledRunId('nightly', T0));
    // An ISO occurrence starts with a digit, never with "manual-", so the two spaces cannot meet.
    expect(a.slice('nightly/'.length)).toMatch(/^manual-/);
    expect(scheduledRunId('nightly', T0).slice('nightly/'.length)).toMatch(/^\d/);
    expect(manualRunId('nightly', 'req-1')).toBe(a);
  });

  it('every key of a run lives under its prefix, so listing runs/<job>/ finds them', () => {
    const id = scheduledRunId('nightly', T0);
    const prefix = runKeys.prefix(id);
    expect(prefix).toBe('runs/nightly/2026-03-01T12:00:00.000Z/');
    for (const key of [
      runKeys.record(id),
      runKeys.planChunk(id, 3, 7),
      runKeys.claim(id, 'x'),
      runKeys.failurePart(id, 3, 1, 'a1b2c3d4'),
      runKeys.failureIndex(id, 2, 3, 1, 'a1b2c3d4'),
      runKeys.output(id),
      runKeys.manifest(id),
    ]) {
      expect(key.startsWith(prefix)).toBe(true);
    }
    expect(runKeys.planChunk(id, 3, 7)).toBe('runs/nightly/2026-03-01T12:00:00.000Z/plan/e3/000007.ndjson');
  });
});
