import { describe, expect, it } from 'vitest';
import {
  DEFAULT_MIN_GAP_MS,
  FAULT_KINDS,
  HUNG_HOOKS,
  LEASE_DELETE_TARGETS,
  ONCE_PER_PLAN,
  planFaults,
  SIGTERM_TARGETS,
  stepDurationMs,
  type FaultKind,
  type FaultStep,
} from './fault-plan';
import { SeededRandom } from './rng';

const count = (steps: ReturnType<typeof planFaults>, kind: FaultKind) => steps.filter((s) => s.kind === kind).length;
/** The kinds the soak had before the faults aimed at one run, one worker or the lease blob. */
const FIRST_KINDS = ['kill', 'pause', 'storage-restart', 'proxy', 'lease-break'] as const;
const stepsOf = <K extends FaultKind>(steps: FaultStep[], kind: K) =>
  steps.filter((s): s is Extract<FaultStep, { kind: K }> => s.kind === kind);

describe('the fault plan', () => {
  it('is the same for the same seed and differs for another', () => {
    const a = planFaults({ seed: 7, durationMs: 600_000, leaseSeconds: 15 });
    expect(planFaults({ seed: 7, durationMs: 600_000, leaseSeconds: 15 })).toEqual(a);
    expect(planFaults({ seed: 8, durationMs: 600_000, leaseSeconds: 15 })).not.toEqual(a);
  });

  it.each([
    // minutes, kinds, least of each kind
    [10, FIRST_KINDS, 5],
    [1.5, FIRST_KINDS, 1],
    // The deploy kinds go in once per plan; the others have three rounds in 10 minutes.
    [10, FAULT_KINDS, 3],
    [5, FAULT_KINDS, 1],
    [0.75, ['lease-break'] as const, 5],
  ])('over %s min injects every kind at least %s times, in order and within the time', (minutes, kinds, least) => {
    for (const seed of [1, 2, 3, 42, 20261121]) {
      const durationMs = minutes * 60_000;
      const steps = planFaults({ seed, durationMs, kinds, leaseSeconds: 15 });
      for (const kind of kinds) {
        if (ONCE_PER_PLAN.includes(kind)) expect(count(steps, kind)).toBe(1);
        else expect(count(steps, kind)).toBeGreaterThanOrEqual(least);
      }
      for (const kind of FAULT_KINDS.filter((k) => !kinds.includes(k as never))) expect(count(steps, kind)).toBe(0);
      for (let i = 1; i < steps.length; i++) {
        const previous = steps[i - 1]!;
        // Faults never overlap: each starts after the previous one is over.
        expect(steps[i]!.atMs).toBeGreaterThanOrEqual(previous.atMs + stepDurationMs(previous));
      }
      const last = steps[steps.length - 1]!;
      expect(last.atMs).toBeLessThanOrEqual(durationMs);
    }
  });

  it('pauses the leader for longer than its lease', () => {
    const pauses = planFaults({ seed: 5, durationMs: 600_000, leaseSeconds: 15 }).filter((s) => s.kind === 'pause');
    expect(pauses.length).toBeGreaterThan(0);
    for (const pause of pauses) expect(pause.kind === 'pause' && pause.pauseMs).toBeGreaterThan(15_000);
  });

  it('hangs each hook and deletes both the lease blob and its container over 10 minutes', () => {
    for (const seed of [1, 2, 3, 42, 20261124]) {
      const steps = planFaults({ seed, durationMs: 600_000, leaseSeconds: 15 });
      expect(new Set(stepsOf(steps, 'hung-hook').map((s) => s.hook))).toEqual(new Set(HUNG_HOOKS));
      expect(new Set(stepsOf(steps, 'lease-delete').map((s) => s.target))).toEqual(new Set(LEASE_DELETE_TARGETS));
    }
  });

  it("stops a straggler once per plan, for five times the soak jobs' hedge wait (5 s) and more", () => {
    for (const seed of [1, 2, 3, 42, 20261127]) {
      const stragglers = stepsOf(planFaults({ seed, durationMs: 600_000, leaseSeconds: 15 }), 'straggler');
      expect(stragglers).toHaveLength(1);
      expect(stragglers[0]!.pauseMs).toBeGreaterThanOrEqual(25_000);
      expect(stragglers[0]!.pauseMs).toBeLessThanOrEqual(30_000);
      expect(stepDurationMs(stragglers[0]!)).toBe(stragglers[0]!.pauseMs);
    }
    // Alone, as the hedging-off soak runs it: one straggler, over within the time.
    const alone = planFaults({ seed: 21, durationMs: 90_000, kinds: ['straggler'], leaseSeconds: 15 });
    expect(alone.map((s) => s.kind)).toEqual(['straggler']);
    expect(alone[0]!.atMs + stepDurationMs(alone[0]!)).toBeLessThanOrEqual(90_000);
  });

  it('sends a bare SIGTERM to the leader and to an instance that does not lead over 10 minutes, the replacement 1-3 s on', () => {
    for (const seed of [1, 2, 3, 42, 20261130]) {
      const steps = stepsOf(planFaults({ seed, durationMs: 600_000, leaseSeconds: 15 }), 'bare-sigterm');
      expect(steps.length).toBeGreaterThanOrEqual(3);
      expect(new Set(steps.map((s) => s.target))).toEqual(new Set(SIGTERM_TARGETS));
      for (const step of steps) {
        expect(step.restartAfterMs).toBeGreaterThanOrEqual(1000);
        expect(step.restartAfterMs).toBeLessThanOrEqual(3000);
        expect(stepDurationMs(step)).toBe(step.restartAfterMs);
      }
    }
  });

  it('drains an instance in every round, lasting as long as its target takes', () => {
    for (const seed of [1, 2, 3, 42, 20261130]) {
      const steps = planFaults({ seed, durationMs: 600_000, leaseSeconds: 15 });
      const drains = stepsOf(steps, 'drain-abort');
      expect(drains.length).toBeGreaterThanOrEqual(3);
      for (const step of drains) {
        expect(step.restartAfterMs).toBeGreaterThanOrEqual(1000);
        expect(step.restartAfterMs).toBeLessThanOrEqual(3000);
        // The soak waits for an instance to take up a long message and for the drain to end, not the plan.
        expect(stepDurationMs(step)).toBe(0);
      }
    }
    // Alone, as `--faults drain-abort` runs it: drains only, over within the time.
    const alone = planFaults({ seed: 5, durationMs: 90_000, kinds: ['drain-abort'], leaseSeconds: 15 });
    expect(alone.length).toBeGreaterThanOrEqual(1);
    expect(new Set(alone.map((s) => s.kind))).toEqual(new Set(['drain-abort']));
    expect(alone[alone.length - 1]!.atMs).toBeLessThanOrEqual(90_000);
  });

  it('fits three rounds of every kind into 10 minutes at the default gap of 6 s; at 8 s, two, and a hook goes unhung', () => {
    const at = (minGapMs: number) => planFaults({ seed: 1, durationMs: 600_000, leaseSeconds: 15, minGapMs });
    expect(stepsOf(at(DEFAULT_MIN_GAP_MS), 'hung-hook')).toHaveLength(3);
    expect(stepsOf(at(8000), 'hung-hook')).toHaveLength(2);
  });

  it('keeps a run record unavailable longer than the SDK retries one call (16 s), so the calls fail', () => {
    const windows = stepsOf(planFaults({ seed: 9, durationMs: 600_000, leaseSeconds: 15 }), 'unreadable-record');
    expect(windows.length).toBeGreaterThan(0);
    for (const step of windows) expect(step.windowMs).toBeGreaterThanOrEqual(20_000);
  });

  it("draws the new kinds' choices only when they are planned: the broken-build plan is as before", () => {
    // Seed 8, lease breaks only: the broken-build test's plan, whose figures RELIABILITY.md gives.
    // Its gap is the one those figures were taken with (8 s, the default then).
    const breaks = planFaults({ seed: 8, durationMs: 60_000, kinds: ['lease-break'], leaseSeconds: 15, minGapMs: 8000 });
    expect(breaks.map((s) => s.atMs)).toEqual([7032, 16055, 23700, 33023, 41875, 50151, 59996]);
  });

  it('refuses an empty list of kinds', () => {
    expect(() => planFaults({ seed: 1, durationMs: 60_000, kinds: [], leaseSeconds: 15 })).toThrow(/at least one fault kind/);
  });
});

describe('the seeded random source', () => {
  it('repeats for a seed, stays in range and shuffles without losing anything', () => {
    const a = new SeededRandom(99);
    const b = new SeededRandom(99);
    const drawn = Array.from({ length: 1000 }, () => a.next());
    expect(Array.from({ length: 1000 }, () => b.next())).toEqual(drawn);
    expect(drawn.every((x) => x >= 0 && x < 1)).toBe(true);
    // Roughly uniform: each tenth of [0, 1) gets 5-15% of the draws.
    for (let d = 0; d < 10; d++) {
      const share = drawn.filter((x) => Math.floor(x * 10) === d).length / drawn.length;
      expect(share).toBeGreaterThan(0.05);
      expect(share).toBeLessThan(0.15);
    }
    const ints = Array.from({ length: 200 }, () => a.int(3, 5));
    expect(new Set(ints)).toEqual(new Set([3, 4, 5]));
    expect(a.shuffle([1, 2, 3, 4, 5]).sort()).toEqual([1, 2, 3, 4, 5]);
    expect(() => a.pick([])).toThrow(RangeError);
  });
});
