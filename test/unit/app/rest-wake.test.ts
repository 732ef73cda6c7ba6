import { describe, expect, it } from 'vitest';
import { ON_TICK_WAKE_MS, restWakeFor } from '../../../src/app/rest-wake';

const at = (iso: string) => Date.parse(iso);

describe('when a resting lease ends for an occurrence', () => {
  it.each([
    // On the timer's grid: the tick at the occurrence's own instant brings the leader.
    { schedule: '* * * * * *', poll: 2000, due: '2026-01-01T00:01:00Z', ahead: ON_TICK_WAKE_MS },
    { schedule: '*/10 * * * * *', poll: 2000, due: '2026-01-01T00:01:00Z', ahead: ON_TICK_WAKE_MS },
    { schedule: '5/10 * * * * *', poll: 2000, due: '2026-01-01T00:01:15Z', ahead: ON_TICK_WAKE_MS },
    // Off the grid: a whole tick ahead, or the beacon's lateness (rounding 1 s + polling), whichever is less.
    { schedule: '*/10 * * * * *', poll: 2000, due: '2026-01-01T00:01:05Z', ahead: 3000 + ON_TICK_WAKE_MS },
    { schedule: '*/2 * * * * *', poll: 2000, due: '2026-01-01T00:01:05Z', ahead: 2000 + ON_TICK_WAKE_MS },
    { schedule: '*/10 * * * * *', poll: 60_000, due: '2026-01-01T00:01:05Z', ahead: 10_000 + ON_TICK_WAKE_MS },
    // No fixed grid: only the beacon.
    { schedule: '0,7,30 * * * * *', poll: 2000, due: '2026-01-01T00:01:07Z', ahead: 3000 + ON_TICK_WAKE_MS },
  ])('$schedule, polling $poll ms: $ahead ms before $due', ({ schedule, poll, due, ahead }) => {
    expect(at(due) - restWakeFor(schedule, poll).wakeAt(at(due))).toBe(ahead);
  });
});
