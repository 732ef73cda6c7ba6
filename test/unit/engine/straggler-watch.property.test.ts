import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { FakeClock } from '../../../src/clock/fake-clock';
import { HEDGE_MULTIPLE, StragglerWatch } from '../../../src/engine/straggler-watch';
import { propertyParameters } from '../../support/fuzz';

type Op =
  | { op: 'send' }
  | { op: 'copy'; pick: number }
  | { op: 'count'; pick: number }
  | { op: 'observe'; ms: number }
  | { op: 'advance'; ms: number }
  | { op: 'due'; limit: number };

const opArb: fc.Arbitrary<Op> = fc.oneof(
  fc.constant({ op: 'send' as const }),
  fc.record({ op: fc.constant('copy' as const), pick: fc.nat() }),
  fc.record({ op: fc.constant('count' as const), pick: fc.nat() }),
  fc.record({ op: fc.constant('observe' as const), ms: fc.integer({ min: 0, max: 20_000 }) }),
  fc.record({
    op: fc.constant('advance' as const),
    ms: fc.oneof(fc.integer({ min: 0, max: 3000 }), fc.integer({ min: 0, max: 30_000 })),
  }),
  fc.record({ op: fc.constant('due' as const), limit: fc.integer({ min: 0, max: 8 }) }),
);

describe('StragglerWatch, on random histories', () => {
  it('never names a counted message, never one before the floor (doubled per copy), never past the limit; and a quiet run makes every one due', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.integer({ min: 0, max: 5000 }),
        fc.integer({ min: 0, max: 10_000 }),
        fc.array(opArb, { maxLength: 200 }),
        async (floorMs, fallbackMs, ops) => {
          const clock = new FakeClock();
          const watch = new StragglerWatch(clock, { floorMs, fallbackMs });
          // The model: each sent message's last send and its copies, and what is counted.
          const sent: { lastSendAt: number; copies: number; counted: boolean }[] = [];
          let lastProgressAt = Number.NEGATIVE_INFINITY;
          let maxObserved = 0;
          const outstanding = () => sent.flatMap((s, m) => (s.counted ? [] : [m]));
          for (const step of ops) {
            const now = clock.now();
            if (step.op === 'send') {
              watch.sent(sent.length);
              sent.push({ lastSendAt: now, copies: 0, counted: false });
            } else if (step.op === 'copy') {
              const open = outstanding();
              if (open.length === 0) continue;
              const m = open[step.pick % open.length] as number;
              watch.sent(m);
              sent[m] = { lastSendAt: now, copies: sent[m]!.copies + 1, counted: false };
            } else if (step.op === 'count') {
              if (sent.length === 0) continue;
              const m = step.pick % sent.length;
              if (!sent[m]!.counted) lastProgressAt = now;
              sent[m]!.counted = true;
              watch.counted(m);
            } else if (step.op === 'observe') {
              watch.observe(step.ms);
              maxObserved = Math.max(maxObserved, step.ms);
            } else if (step.op === 'advance') {
              await clock.advance(step.ms);
            } else {
              const due = watch.due(step.limit);
              expect(due.length).toBeLessThanOrEqual(step.limit);
              expect(new Set(due).size).toBe(due.length);
              const threshold = watch.thresholdMs();
              expect(threshold).toBeGreaterThanOrEqual(floorMs);
              for (const m of due) {
                const s = sent[m];
                expect(s?.counted).toBe(false);
                expect(now - s!.lastSendAt).toBeGreaterThanOrEqual(threshold * 2 ** s!.copies);
              }
              // Liveness: once the run has been quiet past the longest threshold there can be, every
              // uncounted message is due (asked without a limit).
              const longest = Math.max(floorMs, fallbackMs, HEDGE_MULTIPLE * maxObserved);
              const all = new Set(watch.due(Number.POSITIVE_INFINITY));
              for (const m of outstanding()) {
                const quietFor = now - Math.max(sent[m]!.lastSendAt, lastProgressAt);
                if (quietFor >= longest * 2 ** sent[m]!.copies) expect(all.has(m)).toBe(true);
              }
            }
          }
          expect(watch.outstanding).toBe(outstanding().length);
        },
      ),
      propertyParameters('straggler watch', 500),
    );
  });
});
