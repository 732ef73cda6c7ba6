import { describe, expect, it } from 'vitest';
import { systemClock } from '../../../src/clock/clock.js';
import { FakeClock } from '../../../src/clock/fake-clock.js';
import { requestRun } from '../../../src/hub/requests.js';
import { defineJob } from '../../../src/jobs/define-job.js';
import { ItemStartGate } from '../../../src/engine/item-start-gate.js';
import type { Leadership } from '../../../src/lease/term.js';
import { buildEngine } from '../../support/engine-harness';
import { memoryPorts } from '../../support/memory-ports';
import { sumJob } from '../../support/sample-jobs';
import { noLeaseToRaise } from '../../support/unit-engine';

const never = new AbortController().signal;

/**
 * A gate on a fake clock, and items that ask it as a worker does: once let through, an item
 * starts and says how long it held the loop (a test advances the clock past the hold itself).
 */
function setup() {
  const clock = new FakeClock();
  const gate = new ItemStartGate(clock);
  const at = (ms: number) => clock.date().getTime() + ms;
  const start = (job: string, options: { holdMs?: number; signal?: AbortSignal } = {}) => {
    const item = { started: false };
    void gate.beforeItem(job, options.signal ?? never).then((ticket) => {
      item.started = true;
      ticket.started(options.holdMs ?? 0);
    });
    return item;
  };
  return { clock, gate, at, start };
}

describe('ItemStartGate', () => {
  it.each([
    ['on an instance that does not lead', (gate: ItemStartGate) => gate.held('cpu', 1000)],
    ['for a job never seen to hold the loop', (gate: ItemStartGate) => gate.lead(Date.parse('2026-01-01T00:00:00.500Z'))],
    [
      'for a job whose holds are short',
      (gate: ItemStartGate) => {
        gate.held('cpu', 19);
        gate.lead(Date.parse('2026-01-01T00:00:00.010Z'));
      },
    ],
  ])('lets an item start at once %s', async (_case, arrange) => {
    const { clock, gate, start } = setup();
    arrange(gate);
    const item = start('cpu');
    await clock.advance(0);
    expect(item.started).toBe(true);
    expect(gate.waited).toBe(0);
  });

  it('lets an item start whose hold ends by the next due instant and its slack', async () => {
    const { clock, gate, at, start } = setup();
    gate.held('cpu', 1000);
    gate.lead(at(900));
    const item = start('cpu');
    await clock.advance(0);
    expect(item.started).toBe(true);
  });

  it('holds back an item whose hold would reach the next due instant until the leader has created its runs', async () => {
    const { clock, gate, at, start } = setup();
    gate.held('cpu', 1000);
    gate.lead(at(600));
    const item = start('cpu');
    await clock.advance(599);
    expect(item.started).toBe(false);
    // The pass at the due instant: the same instant again changes nothing.
    gate.lead(at(1));
    await clock.advance(0);
    expect(item.started).toBe(false);
    gate.lead(at(1000));
    await clock.advance(0);
    expect(item.started).toBe(true);
    expect(gate.waited).toBe(1);
  });

  it('after a pass that came late, waits for one on time rather than carry the lateness on', async () => {
    const { clock, gate, at, start } = setup();
    gate.held('cpu', 1000);
    gate.lead(at(0));
    const item = start('cpu');
    // The pass for the instant due now ends 300 ms late: an item started then would make the
    // next instant, a second after this one, 300 ms late too.
    await clock.advance(300);
    gate.lead(at(700));
    await clock.advance(0);
    expect(item.started).toBe(false);
    await clock.advance(720);
    gate.lead(at(980));
    await clock.advance(0);
    expect(item.started).toBe(true);
  });

  it('judges a job by the longest of its recent holds, and only that job', async () => {
    const { clock, gate, at, start } = setup();
    gate.held('cpu', 1000);
    for (let i = 0; i < 7; i++) gate.held('cpu', 5);
    gate.lead(at(600));
    const cpu = start('cpu');
    const io = start('io');
    await clock.advance(0);
    expect(cpu.started).toBe(false);
    expect(io.started).toBe(true);
    gate.leave();
    await clock.advance(0);
    // Eight later short holds push the long one out.
    gate.held('cpu', 5);
    gate.lead(at(600));
    const again = start('cpu');
    await clock.advance(0);
    expect(again.started).toBe(true);
  });

  it('reckons the items it lets through one after another, as the loop runs them', async () => {
    const { clock, gate, at, start } = setup();
    gate.held('cpu', 1000);
    gate.lead(at(500));
    const items = [start('cpu', { holdMs: 1000 }), start('cpu', { holdMs: 1000 }), start('cpu', { holdMs: 1000 })];
    await clock.advance(500);
    expect(items.map((i) => i.started)).toEqual([false, false, false]);
    // Runs every second: the pass lets one through, whose hold ends at the next instant; the
    // others, let through with it, would hold the loop after it, so they wait for the pass after.
    gate.lead(at(1000));
    await clock.advance(0);
    expect(items.map((i) => i.started)).toEqual([true, false, false]);
    // The first item's hold, up to the next instant.
    await clock.advance(1000);
    gate.lead(at(1000));
    await clock.advance(0);
    expect(items.map((i) => i.started)).toEqual([true, true, false]);
    await clock.advance(1000);
    gate.lead(at(1000));
    await clock.advance(0);
    expect(items.map((i) => i.started)).toEqual([true, true, true]);
  });

  it('frees the time it reserved for an item that does not start after all', async () => {
    const { clock, gate, at } = setup();
    gate.held('cpu', 1000);
    gate.lead(at(1500));
    // Let through, then dropped (its invocation ran out of time): the next fits only because
    // the first's hold will not come before it.
    const first = await gate.beforeItem('cpu', never);
    first.dropped();
    first.dropped();
    let second = false;
    void gate.beforeItem('cpu', never).then(() => (second = true));
    await clock.advance(0);
    expect(second).toBe(true);
    expect(gate.waited).toBe(0);
  });

  it('lets every waiting item start when the term ends', async () => {
    const { clock, gate, at, start } = setup();
    gate.held('cpu', 1000);
    gate.lead(at(300));
    const items = [start('cpu'), start('cpu')];
    await clock.advance(100);
    expect(items.some((i) => i.started)).toBe(false);
    gate.leave();
    await clock.advance(0);
    expect(items.every((i) => i.started)).toBe(true);
    // Not leading: nothing waits.
    const later = start('cpu');
    await clock.advance(0);
    expect(later.started).toBe(true);
  });

  it('never holds an item longer than its bound, however long the pass takes', async () => {
    const { clock, gate, at, start } = setup();
    gate.held('cpu', 1000);
    gate.lead(at(300));
    const item = start('cpu');
    await clock.advance(4999);
    expect(item.started).toBe(false);
    await clock.advance(1);
    expect(item.started).toBe(true);
    expect(clock.pendingTimers).toBe(0);
  });

  it('lets an item start at once when its signal aborts', async () => {
    const { clock, gate, at, start } = setup();
    gate.held('cpu', 1000);
    gate.lead(at(300));
    const stop = new AbortController();
    const item = start('cpu', { signal: stop.signal });
    await clock.advance(100);
    expect(item.started).toBe(false);
    stop.abort(new Error('run cancelled'));
    await clock.advance(0);
    expect(item.started).toBe(true);
    expect(clock.pendingTimers).toBe(0);
  });
});

describe("the leader's passes and the gate", () => {
  it('tell it each next due instant once its runs are created, and that the term is over', async () => {
    const clock = new FakeClock({ wallOrigin: new Date('2026-01-01T00:00:02Z') });
    const gate = new ItemStartGate(clock);
    const told: string[] = [];
    const lead = gate.lead.bind(gate);
    gate.lead = (at) => (told.push(new Date(at).toISOString()), lead(at));
    const leave = gate.leave.bind(gate);
    gate.leave = () => (told.push('leave'), leave());
    const engine = buildEngine(memoryPorts(), [sumJob({ items: 1, schedule: '*/5 * * * * *' })], { clock, itemGate: gate });
    const leadership: Leadership = {
      identity: 'leader-1',
      epoch: 1,
      signal: new AbortController().signal,
      yieldSignal: new AbortController().signal,
      heartbeat: () => undefined,
      remainingMs: () => 60_000,
      raiseEpoch: noLeaseToRaise,
      restUntil: () => undefined,
    };
    let done = false;
    const term = engine.coordinator.lead(leadership, { termMs: 7000 }).finally(() => (done = true));
    await clock.advanceUntil(() => done, { maxMs: 10_000, stepMs: 50 });
    await term;
    const instants = [...new Set(told.filter((t) => t !== 'leave'))];
    expect(instants.slice(0, 2)).toEqual(['2026-01-01T00:00:05.000Z', '2026-01-01T00:00:10.000Z']);
    // The run due at 00:00:05 was created before the gate heard of 00:00:10.
    expect(await engine.readRun('sum/2026-01-01T00:00:05.000Z')).toMatchObject({ occurrence: '2026-01-01T00:00:05.000Z' });
    expect(told.at(-1)).toBe('leave');
  });
});

describe('holds learned from results', () => {
  it("teach the leader's gate how long another instance's items held its loop", async () => {
    const ports = memoryPorts();
    const gate = new ItemStartGate(systemClock);
    const learned: Array<[string, number]> = [];
    const held = gate.held.bind(gate);
    gate.held = (job, ms) => (learned.push([job, ms]), held(job, ms));
    const busy = defineJob<number, number, number>({
      name: 'busy',
      schedule: '0 0 0 1 1 *',
      split: () => [1, 2],
      process: async (item) => {
        const until = performance.now() + 30;
        while (performance.now() < until) {
          // Holds the loop, as a synchronous computation would.
        }
        return item;
      },
      aggregate: { initial: () => 0, add: (sum, r) => sum + r },
    });
    // The harness's workers have no gate of their own: what the gate learns came in results.
    const engine = buildEngine(ports, [busy], { itemGate: gate });
    const stop = engine.startWorkers(1);
    const runId = await requestRun(ports.docs, 'busy');
    await engine.leadUntil('leader', async () => (await engine.readRun(runId))?.state === 'succeeded', 20_000);
    await stop();
    expect(learned.length).toBeGreaterThan(0);
    expect(learned.every(([job, ms]) => job === 'busy' && ms >= 30)).toBe(true);
  });
});
