import { sumRequestCounts } from '../../src/storage/request-counter';
import { report, type BenchOptions, type BenchResult } from '../lib/report';
import { lastThroughputMeasurement, measureThroughput } from './throughput';

/**
 * transactions: every storage request, counted by operation by the pipeline policy in the client
 * factory (`StorageRequestCounter`) in every instance process and summed, for
 *   - the throughput run (N items, one item per message): requests per item, against the plain-
 *     SDK floor's requests per item counted the same way in the same run. Goal: ≤ 4.5 per item.
 *   - idle coordinator ticks: each instance's requests over a window with no run open, per tick.
 *     Goal: ≤ 2 per idle tick per instance.
 * When the throughput benchmark ran earlier in the same `npm run bench`, its run is reused.
 */
export const name = 'transactions';

const PER_ITEM_GOAL = 4.5;
const IDLE_GOAL = 2;

export async function run(options: BenchOptions = {}): Promise<BenchResult> {
  const items = options.smoke ? 50 : 2000;
  const m = lastThroughputMeasurement(items) ?? (await measureThroughput(items, options.smoke ? 2000 : 20_000, 1, options.smoke));
  const ours = m.ours.requestsTotal / items;
  const floor = m.floor.requestsTotal / items;
  const ticks = m.idle.windowMs / m.idle.tickMs;
  const idle = m.idle.perInstance.map((i) => {
    const total = Object.values(i.requests).reduce((a, b) => a + b, 0);
    const host = Object.entries(i.requests)
      .filter(([op]) => op === 'queue.messages.receive')
      .reduce((a, [, n]) => a + n, 0);
    return { ...i, perTick: total / ticks, ownPerTick: (total - host) / ticks, hostPollingPerTick: host / ticks };
  });
  const idlePerTick = idle.reduce((a, i) => a + i.perTick, 0) / idle.length;
  const idleLine = `transactions (idle)  ${idlePerTick.toFixed(2)} requests per ${m.idle.tickMs / 1000} s tick per instance (${((idlePerTick * 1000) / m.idle.tickMs).toFixed(2)}/s)  goal ≤ ${IDLE_GOAL}  ${idlePerTick <= IDLE_GOAL ? 'met' : 'missed'}`;
  const result = report(
    name,
    {
      samples: { ours: m.ours.requests, floor: m.floor.requests, itemsPerMessage50: m.packed.requests, idle },
      summary: {
        items,
        oursRequestsPerItem: ours,
        floorRequestsPerItem: floor,
        perItemGoal: PER_ITEM_GOAL,
        perItemGoalMet: ours <= PER_ITEM_GOAL,
        goalNote: `the goal's ratio is ${PER_ITEM_GOAL} / the floor's requests per item, so met means ≤ ${PER_ITEM_GOAL} requests per item`,
        itemsPerMessage50RequestsPerItem: m.packed.requestsTotal / items,
        byOperation: sumRequestCounts(m.ours.requests),
        idle: {
          windowSeconds: m.idle.windowMs / 1000,
          tickSeconds: m.idle.tickMs / 1000,
          requestsPerTickPerInstance: idlePerTick,
          requestsPerSecondPerInstance: (idlePerTick * 1000) / m.idle.tickMs,
          goal: IDLE_GOAL,
          met: idlePerTick <= IDLE_GOAL,
          perInstance: idle.map((i) => ({
            name: i.name,
            leader: i.leader,
            perTick: i.perTick,
            batonPerTick: i.ownPerTick,
            hostQueuePollingPerTick: i.hostPollingPerTick,
          })),
          note: 'host queue polling is the local host polling the work queue at host.json maxPollingInterval (2 s) when idle; baton is the lease (a follower reads it once per tick; the leader renews it, checks for a handover request once a tick and moves its tick beacon at each renewal), run documents and the leader drains. Per tick depends on the tick: per second is the cost on the bill',
        },
      },
      ours,
      floor,
      unit: 'requests/item',
      goal: { ratio: PER_ITEM_GOAL / floor, direction: 'atMost' },
    },
    options,
  );
  console.log(idleLine);
  return result;
}
