import { expect } from 'vitest';
import { FakeClock } from '../../src/clock/fake-clock';
import type { HandoverTiming } from '../../src/lease/handover-timing';
import { InMemoryHandoverRequestStore } from '../../src/lease/in-memory-handover-request-store';
import { InMemoryLeaseStore } from '../../src/lease/in-memory-lease-store';
import type { LeaderElectorOptions } from '../../src/lease/elector-options';
import type { LeaderEvent } from '../../src/lease/leader-events';
import { LeaderElector } from '../../src/lease/leader-elector';
import type { LeaderRank } from '../../src/lease/leader-rank';
import { ScriptedLeaseStore } from './scripted-lease-store';

export type SeenEvent = LeaderEvent & { at: number };

/**
 * Candidates on one in-memory lease and one fake clock, each with its own scripted view of the
 * store (to fail or delay its calls), every event recorded with the clock's time.
 */
export function candidatesOnOneLease(timing: Partial<HandoverTiming>) {
  const clock = new FakeClock();
  const memory = new InMemoryLeaseStore({ clock });
  const requests = new InMemoryHandoverRequestStore({ clock });
  const events: SeenEvent[] = [];
  const stores = new Map<string, ScriptedLeaseStore>();
  /** A candidate; without `rank`, one that never asks, defers or is asked. */
  const candidate = (identity: string, rank: LeaderRank | undefined, options: Partial<LeaderElectorOptions> = {}) => {
    const store = new ScriptedLeaseStore(memory, requests);
    stores.set(identity, store);
    return new LeaderElector({
      store,
      identity,
      clock,
      random: () => 0.5,
      handover: timing,
      ...(rank ? { rank, requests: store } : {}),
      onEvent: (event) => events.push({ ...event, at: clock.now() }),
      ...options,
    });
  };
  const of = (identity: string, type?: LeaderEvent['type']) =>
    events.filter((e) => e.identity === identity && (type === undefined || e.type === type));
  const calls = (identity: string, operation: Parameters<ScriptedLeaseStore['count']>[0]) =>
    stores.get(identity)?.count(operation) ?? 0;
  return { clock, memory, requests, events, stores, candidate, of, calls };
}

/**
 * That `successor` took the lease from a `crashed` holder only once its lease could have expired
 * (15 s after its last renewal), and the lease's history says so.
 */
export async function expectTakenOnExpiry(
  on: ReturnType<typeof candidatesOnOneLease>,
  crashed: string,
  successor: string,
): Promise<void> {
  const acquiredAt = on.of(successor, 'acquired')[0]!.at;
  const lastRenew = Math.max(0, ...on.of(crashed, 'renewed').map((e) => e.at));
  // Not before the crashed holder's lease could have expired: one holder at a time.
  expect(acquiredAt).toBeGreaterThanOrEqual(lastRenew + 15_000);
  expect((await on.memory.read()).changes?.at(-1)).toMatchObject({ holder: successor, previous: crashed, reason: 'expired' });
}
