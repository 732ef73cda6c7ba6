import { InvocationContext, type Timer } from '@azure/functions';
import { describe, expect, it } from 'vitest';
import { createTickMessageHandler, type TickOutcome } from '../../../src/app/coordinator-tick';
import { FakeClock } from '../../../src/clock/fake-clock';
import type { TickMessage } from '../../../src/engine/messages';
import { TickBeacon } from '../../../src/engine/tick-beacon';
import { InMemoryQueue } from '../../../src/queue/in-memory-queue';

const LEASE_MS = 15_000;

function setup(takeover?: { breakAfterMs: number; renewIntervalMs: number }) {
  const clock = new FakeClock();
  const queue = new InMemoryQueue('work', { clock });
  const beacon = new TickBeacon({ queue, clock, leaseMs: LEASE_MS, ...(takeover ? { takeover } : {}) });
  const feed = async (event: Parameters<TickBeacon['onLeaderEvent']>[0]) => {
    beacon.onLeaderEvent(event);
    await beacon.idle();
  };
  /** Whether a receive now would get the beacon (it is then hidden again for a minute). */
  const surfaced = async () => (await queue.receive(32, 60)).map((m) => JSON.parse(m.text) as TickMessage);
  return { clock, queue, beacon, feed, surfaced };
}

const identity = 'a';

describe('TickBeacon: one delayed tick per term', () => {
  it('stays hidden while the leader renews, and surfaces once its lease could have expired after the last renewal', async () => {
    const { clock, queue, feed, surfaced } = setup();
    await feed({ type: 'acquired', identity, epoch: 4, leaseId: 'l' });
    expect(queue.peekAll()).toEqual([JSON.stringify({ v: 1, t: 'tick', epoch: 4 })]);
    for (let t = 0; t < 12; t++) {
      await clock.advance(5000);
      await feed({ type: 'renewed', identity, epoch: 4, latencyMs: 5 });
      expect(await surfaced()).toEqual([]);
    }
    // The leader dies: no more renewals. Hidden for the lease and a 2 s margin, then it wakes someone.
    await clock.advance(LEASE_MS + 1000);
    expect(await surfaced()).toEqual([]);
    await clock.advance(1000);
    expect(await surfaced()).toEqual([{ v: 1, t: 'tick', epoch: 4 }]);
    expect(queue.peekAll()).toHaveLength(1);
  });

  it('with crash takeover, surfaces a second after a dead leader could be broken, not after its lease', async () => {
    const { clock, beacon, feed, surfaced } = setup({ breakAfterMs: 3000, renewIntervalMs: 5000 });
    expect(beacon.hiddenSeconds).toBe(9);
    await feed({ type: 'acquired', identity, epoch: 4, leaseId: 'l' });
    // A live leader's renewals move it before it surfaces.
    for (let t = 0; t < 12; t++) {
      await clock.advance(5000);
      await feed({ type: 'renewed', identity, epoch: 4, latencyMs: 5 });
      expect(await surfaced()).toEqual([]);
    }
    // The leader dies right after a renewal: its silence can be broken from 3 s after its last
    // beat, and the beacon wakes a successor by the renew interval and that, plus a second.
    await clock.advance(8000);
    expect(await surfaced()).toEqual([]);
    await clock.advance(1000);
    expect(await surfaced()).toEqual([{ v: 1, t: 'tick', epoch: 4 }]);
  });

  it('surfaces at once when the term ends with a release: the wake for a successor', async () => {
    const { clock, queue, feed, surfaced } = setup();
    await feed({ type: 'acquired', identity, epoch: 1, leaseId: 'l' });
    await clock.advance(3000);
    await feed({ type: 'released', identity, epoch: 1, ledMs: 3000 });
    expect(await surfaced()).toEqual([{ v: 1, t: 'tick', epoch: 1 }]);
    // The next term sends its own; there is never more than one per term.
    await feed({ type: 'acquired', identity, epoch: 2, leaseId: 'm' });
    expect(queue.peekAll()).toHaveLength(2);
  });

  it('surfaces when the rest ends when the release leaves the lease resting: the wake for the next occurrence', async () => {
    const { clock, feed, surfaced } = setup();
    await feed({ type: 'acquired', identity, epoch: 3, leaseId: 'l' });
    await clock.advance(1000);
    const restingUntil = new Date(clock.date().getTime() + 42_500);
    await feed({ type: 'released', identity, epoch: 3, ledMs: 1000, restingUntil });
    await clock.advance(42_000);
    expect(await surfaced()).toEqual([]);
    // Whole seconds, rounded up: never before the rest ends.
    await clock.advance(1000);
    expect(await surfaced()).toEqual([{ v: 1, t: 'tick', epoch: 3 }]);
  });

  it('surfaces at once when the leader says it is leaving, and again at its release if it was taken meanwhile', async () => {
    const { clock, queue, feed, surfaced } = setup();
    await feed({ type: 'acquired', identity, epoch: 7, leaseId: 'l' });
    await clock.advance(3000);
    expect(await surfaced()).toEqual([]);
    await feed({ type: 'leaving', identity, epoch: 7, waitMs: 5000 });
    // A renewal while it waits for a successor leaves the wake visible.
    await clock.advance(2000);
    await feed({ type: 'renewed', identity, epoch: 7, latencyMs: 5 });
    // The wake that brings a successor to ask, while the leader still leads.
    const [woken] = await queue.receive(1, 60);
    expect(JSON.parse(woken!.text)).toEqual({ v: 1, t: 'tick', epoch: 7 });
    await queue.delete(woken!);
    // Its receiver dealt with it; the release sends another, the usual wake for a successor.
    await feed({ type: 'released', identity, epoch: 7, ledMs: 4000, to: 'b' });
    expect(await surfaced()).toEqual([{ v: 1, t: 'tick', epoch: 7 }]);
  });

  it('keeps the chain when its beacon went missing (received early): the next renewal sends another', async () => {
    const { clock, queue, feed } = setup();
    await feed({ type: 'acquired', identity, epoch: 7, leaseId: 'l' });
    const [sent] = await queue.receive(1, 60).then(async (none) => {
      expect(none).toEqual([]);
      await clock.advance(17_000);
      return queue.receive(1, 60);
    });
    await queue.delete(sent!);
    await feed({ type: 'renewed', identity, epoch: 7, latencyMs: 5 });
    expect(queue.peekAll()).toEqual([JSON.stringify({ v: 1, t: 'tick', epoch: 7 })]);
  });

  it('leaves a lost term’s beacon to surface at its time, and wakes at once if the lease was then released', async () => {
    const { clock, feed, surfaced } = setup();
    await feed({ type: 'acquired', identity, epoch: 2, leaseId: 'l' });
    await feed({ type: 'lost', identity, epoch: 2, reason: 'broken', sinceLastRenewMs: 100 });
    expect(await surfaced()).toEqual([]);
    await clock.advance(17_000);
    expect(await surfaced()).toEqual([{ v: 1, t: 'tick', epoch: 2 }]);
    // A deadline loss is followed by a release when the lease was still ours: the lease is free now.
    await feed({ type: 'acquired', identity, epoch: 3, leaseId: 'm' });
    await feed({ type: 'lost', identity, epoch: 3, reason: 'deadline', sinceLastRenewMs: 10_000 });
    await feed({ type: 'released', identity, epoch: 3, ledMs: 10_000 });
    expect(await surfaced()).toEqual([{ v: 1, t: 'tick', epoch: 3 }]);
  });
});

describe("a tick message's receiver", () => {
  const message: TickMessage = { v: 1, t: 'tick', epoch: 5 };
  it.each<{ name: string; outcome: TickOutcome | Error; resent: number | undefined }>([
    { name: 'led: its own term has its own beacon', outcome: { led: true, epoch: 6 }, resent: undefined },
    { name: 'a newer term holds the lease', outcome: { led: false, holder: 'b', epoch: 6 }, resent: undefined },
    {
      name: 'the sender still holds it: hidden past its lease again',
      outcome: { led: false, holder: 'a', epoch: 5 },
      resent: 17,
    },
    { name: 'nobody holds it: again after a tick', outcome: { led: false, holder: undefined }, resent: 10 },
    { name: 'this instance lost its term meanwhile', outcome: { led: 'lost', reason: 'broken' }, resent: 10 },
    { name: 'the tick failed: again after a tick, not thrown', outcome: new Error('storage is down'), resent: 10 },
    {
      name: 'the lease rests: hidden until the rest ends, when it wakes the next leader',
      outcome: { led: false, holder: undefined, restingUntil: new Date('2026-01-01T00:00:42Z') },
      resent: 42,
    },
    {
      name: 'this instance is stopping and did not look: on to another instance a second later',
      outcome: { led: false, holder: undefined, stopping: true },
      resent: 1,
    },
  ])('$name', async ({ outcome, resent }) => {
    const sends: Array<{ message: TickMessage; seconds: number }> = [];
    const handler = createTickMessageHandler(
      async (timer: Timer) => {
        expect(timer.isPastDue).toBe(false);
        if (outcome instanceof Error) throw outcome;
        return outcome;
      },
      { ...RECEIVER, resend: async (m, seconds) => void sends.push({ message: m, seconds }) },
    );
    await handler(message, new InvocationContext({ functionName: 'baton-worker', invocationId: 'x' }));
    expect(sends).toEqual(resent === undefined ? [] : [{ message, seconds: resent }]);
  });

  it('leads through a rest for a wake tick, and passes on a plain tick if it cannot lead', async () => {
    const wakes: Array<boolean | undefined> = [];
    const sends: Array<{ message: TickMessage; seconds: number }> = [];
    let outcome: TickOutcome = { led: true, epoch: 9 };
    const handler = createTickMessageHandler(
      async (_timer, _context, options) => {
        wakes.push(options?.wake);
        return outcome;
      },
      { ...RECEIVER, resend: async (m, seconds) => void sends.push({ message: m, seconds }) },
    );
    const context = new InvocationContext({ functionName: 'baton-worker', invocationId: 'x' });
    const wake: TickMessage = { v: 1, t: 'tick', epoch: 0, wake: true };
    await handler(wake, context);
    await handler(message, context);
    expect(wakes).toEqual([true, undefined]);
    expect(sends).toEqual([]);
    // A wake that finds a leader looks once more a tick later (that leader may be about to rest), then no more.
    outcome = { led: false, holder: 'b', epoch: 4 };
    await handler(wake, context);
    expect(sends).toEqual([{ message: { ...wake, retried: true }, seconds: 10 }]);
    await handler({ ...wake, retried: true }, context);
    expect(sends).toHaveLength(1);
    sends.length = 0;
    // Should a tick still answer with a rest, the copy that waits for the rest's end is a plain tick.
    outcome = { led: false, holder: undefined, restingUntil: new Date('2026-01-01T00:00:42Z') };
    await handler({ ...wake, retried: true }, context);
    expect(sends).toEqual([{ message: { v: 1, t: 'tick', epoch: 0 }, seconds: 42 }]);
  });
});

/** What the receiver's beacon side answers, on a clock at 2026-01-01T00:00:00Z. */
const RECEIVER = {
  hiddenSeconds: 17,
  retrySeconds: 10,
  secondsUntil: (at: Date) => Math.ceil((at.getTime() - Date.parse('2026-01-01T00:00:00Z')) / 1000),
};
