import { expect } from 'vitest';
import type { DeadLetter } from '../../src/engine/dead-letters';
import { drainResults } from '../../src/engine/drain';
import { StaleEpochError } from '../../src/errors';
import { poisonNoteSchema, truncate } from '../../src/engine/messages';
import { MAX_QUEUE_MESSAGE_BYTES } from '../../src/queue/queue-port';
import { runKeys, type RunRecord } from '../../src/hub/run-record';
import {
  BYSTANDER_CLAIM,
  fullySeen,
  hostEntry,
  okOutcome,
  PLANNED,
  resultText,
  RUNS,
  workText,
  type Delivery,
  type MalformedHub,
} from './malformed-hub';
import { expectedSum } from './sample-jobs';

/** One hand-made message and what must become of it. */
export interface MalformedCase {
  name: string;
  /** The queue it arrives on. */
  queue: 'work' | 'results' | 'poison';
  /** Its text; may store the blobs it points at first. */
  body(hub: MalformedHub): Promise<string> | string;
  /** The queue refuses it at send, with this reason; a work body is then handed to the worker directly. */
  refusedBySend?: RegExp;
  /**
   * What the worker answers (work queue only). `left`: it throws on every delivery, leaving the
   * message to an instance that knows it, until the host moves it to the poison queue as is.
   */
  worker?: { kind: 'poisoned' | 'dropped' | 'left'; reason: RegExp };
  /** The dead letter the leader keeps for it, by reason; none when absent. */
  deadLetter?: RegExp;
  /** The body the letter keeps, when not the message's own (a worker's note keeps the body it wraps). */
  letterBody?: string;
  /** How it moves the target run's counters (each item of the target still counts exactly once). */
  target?: { rejected?: number; duplicates?: number };
  /** The leader deletes it as a message of the ended run, saying so. */
  droppedForEndedRun?: true;
}

const MAX_SAFE = Number.MAX_SAFE_INTEGER;
const base64 = (text: string) => Buffer.from(text, 'utf8').toString('base64');
const work = (fields: Record<string, unknown>) =>
  JSON.stringify({ v: 1, t: 'work', run: RUNS.target, job: 'sum', first: 0, count: 1, items: [{ i: 0 }], ...fields });
const result = (fields: Record<string, unknown>) =>
  JSON.stringify({ v: 1, t: 'result', run: RUNS.target, job: 'sum', outcomes: [okOutcome(1)], ...fields });
const without = (text: string, field: string) => {
  const value = JSON.parse(text) as Record<string, unknown>;
  delete value[field];
  return JSON.stringify(value);
};
/** A body over the 64 KiB a queue message can hold, of the character JSON escaping doubles. */
const OVERSIZED = '"'.repeat(70 * 1024);
const ALIAS = 'sum/../sum/manual-target';

export const MALFORMED_CASES: MalformedCase[] = [
  // ── work queue: what the worker does with it, then what the leader does with its poison note ──
  {
    name: 'work: not JSON',
    queue: 'work',
    body: () => 'this is {not JSON (work)',
    worker: { kind: 'poisoned', reason: /^not JSON$/ },
    deadLetter: /^not JSON$/,
  },
  {
    name: 'work: a valid message base64-encoded (a sender left on messageEncoding base64), where plain JSON is expected',
    queue: 'work',
    body: () => base64(workText(RUNS.target, 0)),
    worker: { kind: 'poisoned', reason: /^not JSON: .*base64/ },
    deadLetter: /^not JSON: .*base64/,
  },
  {
    name: 'work: schema version 2 (a newer Baton wrote it)',
    queue: 'work',
    body: () => work({ v: 2 }),
    worker: { kind: 'left', reason: /retrying: a message of version 2, which this version of Baton does not know$/ },
    deadLetter: /^unreadable message on the poison queue: v: /,
  },
  {
    name: 'work: a kind of message a newer Baton added',
    queue: 'work',
    body: () => JSON.stringify({ v: 1, t: 'rebalance', shards: 4 }),
    worker: { kind: 'left', reason: /retrying: a rebalance message, which this version of Baton does not know$/ },
    deadLetter: /^unreadable message on the poison queue: /,
  },
  {
    name: 'work: a missing field (count)',
    queue: 'work',
    body: () => without(work({}), 'count'),
    worker: { kind: 'poisoned', reason: /^wrong shape: count: / },
    deadLetter: /^wrong shape: count: /,
  },
  {
    name: 'work: items out of range (3..4 of a run that planned 4)',
    queue: 'work',
    body: () => workText(RUNS.target, 3, 2),
    worker: { kind: 'poisoned', reason: /^items 3\.\.4 are out of range: the run planned 4$/ },
    deadLetter: /out of range/,
    target: { rejected: 1 },
  },
  {
    name: 'work: a negative index (first -1)',
    queue: 'work',
    body: () => work({ first: -1 }),
    worker: { kind: 'poisoned', reason: /^wrong shape: first: / },
    deadLetter: /^wrong shape: first: /,
  },
  {
    name: 'work: a count near 2^53 behind a claim check',
    queue: 'work',
    body: () => work({ count: MAX_SAFE, items: undefined, claim: runKeys.claim(RUNS.target, 'huge') }),
    worker: { kind: 'poisoned', reason: /out of range: the run planned 4$/ },
    deadLetter: /out of range/,
    target: { rejected: 1 },
  },
  {
    name: 'work: an unknown run',
    queue: 'work',
    body: () => workText(RUNS.unknown, 0),
    worker: { kind: 'poisoned', reason: /^unknown run sum\/manual-nobody$/ },
    deadLetter: /^unknown run sum\/manual-nobody$/,
  },
  {
    name: 'work: a run id that names the target run through ".."',
    queue: 'work',
    body: () => work({ run: ALIAS }),
    worker: { kind: 'poisoned', reason: /^wrong shape: run: / },
    deadLetter: /^wrong shape: run: /,
  },
  {
    name: 'work: a run id too long to name a blob (20,000 characters)',
    queue: 'work',
    body: () => work({ run: `sum/manual-${'x'.repeat(20_000)}` }),
    worker: { kind: 'poisoned', reason: /^wrong shape: run: / },
    deadLetter: /^wrong shape: run: /,
  },
  {
    name: 'work: a message of a cancelled run',
    queue: 'work',
    body: () => workText(RUNS.ended, 0),
    worker: { kind: 'dropped', reason: /^run is cancelled$/ },
  },
  {
    name: 'work: a claim check to a missing blob',
    queue: 'work',
    body: () => work({ items: undefined, claim: runKeys.claim(RUNS.target, 'missing') }),
    worker: { kind: 'poisoned', reason: /^claim-check blob runs\/sum\/manual-target\/claims\/missing\.json is missing$/ },
    deadLetter: /is missing$/,
    target: { rejected: 1 },
  },
  {
    name: 'work: a claim check to a blob that is not JSON',
    queue: 'work',
    body: async (hub) => {
      const key = runKeys.claim(RUNS.target, 'garbled-items');
      await hub.ports.docs.write(key, '[{"i":0}', { ifNoneMatch: '*' });
      return work({ items: undefined, claim: key });
    },
    worker: { kind: 'poisoned', reason: /^claim-check blob .*garbled-items\.json is not JSON$/ },
    deadLetter: /is not JSON$/,
    target: { rejected: 1 },
  },
  {
    name: 'work: a job that is not the run’s',
    queue: 'work',
    body: () => work({ job: 'tally' }),
    worker: { kind: 'poisoned', reason: /^run sum\/manual-target belongs to job sum, not tally$/ },
    deadLetter: /belongs to job sum/,
    target: { rejected: 1 },
  },
  {
    name: 'work: an oversized body (70 KiB, over the 64 KiB queue limit)',
    queue: 'work',
    body: () => OVERSIZED,
    refusedBySend: /over the limit of 49152 bytes/,
    worker: { kind: 'poisoned', reason: /^not JSON$/ },
    deadLetter: /^not JSON$/,
  },

  // ── results queue: what the leader's drain does with it ──
  {
    name: 'result: not JSON',
    queue: 'results',
    body: () => '{"v":1,"t":"result",',
    deadLetter: /^malformed result: not JSON$/,
  },
  {
    name: 'result: a valid result base64-encoded, where plain JSON is expected',
    queue: 'results',
    body: () => base64(resultText(RUNS.target, [okOutcome(1, 999)])),
    deadLetter: /^malformed result: not JSON: .*base64/,
  },
  {
    name: 'result: schema version 2',
    queue: 'results',
    body: () => result({ v: 2 }),
    deadLetter: /^malformed result: v: /,
  },
  {
    name: 'result: missing fields (neither outcomes nor claim)',
    queue: 'results',
    body: () => without(result({}), 'outcomes'),
    deadLetter: /^malformed result: exactly one of outcomes and claim \(or only a retry note\)$/,
  },
  {
    name: 'result: an outcome missing its ok field',
    queue: 'results',
    body: () => result({ outcomes: [{ i: 1, r: { v: 999 } }] }),
    deadLetter: /^malformed result: outcomes\.0\.ok: /,
  },
  {
    name: 'result: no outcomes at all (an empty list)',
    queue: 'results',
    body: () => result({ outcomes: [] }),
    deadLetter: /^malformed result: outcomes: /,
  },
  {
    name: 'result: an index out of range (i = planned)',
    queue: 'results',
    body: () => resultText(RUNS.target, [okOutcome(PLANNED.target, 999)]),
    deadLetter: /^result for run sum\/manual-target names item 4 outside its plan of 4 items$/,
    target: { rejected: 1 },
  },
  {
    name: 'result: a negative index',
    queue: 'results',
    body: () => resultText(RUNS.target, [okOutcome(-1, 999)]),
    deadLetter: /^malformed result: outcomes\.0\.i: /,
  },
  {
    name: 'result: an unknown run',
    queue: 'results',
    body: () => resultText(RUNS.unknown, [okOutcome(0)]),
    deadLetter: /^unknown run sum\/manual-nobody$/,
  },
  {
    name: 'result: a run id that names the target run through ".."',
    queue: 'results',
    body: () => result({ run: ALIAS, outcomes: [okOutcome(1, 999)] }),
    deadLetter: /^malformed result: run: /,
  },
  {
    name: 'result: a job that is not the run’s (its values would fold into the wrong output)',
    queue: 'results',
    body: () => result({ job: 'tally', outcomes: [okOutcome(1, 999)] }),
    deadLetter: /^result for run sum\/manual-target names job tally, but the run belongs to job sum$/,
    target: { rejected: 1 },
  },
  {
    name: 'result: a cancelled run',
    queue: 'results',
    body: () => resultText(RUNS.ended, [okOutcome(0)]),
    droppedForEndedRun: true,
  },
  {
    name: 'result: a claim check to a missing blob',
    queue: 'results',
    body: () => result({ outcomes: undefined, claim: runKeys.claim(RUNS.target, 'missing') }),
    deadLetter: /^claim-check blob runs\/sum\/manual-target\/claims\/missing\.json is missing$/,
  },
  {
    name: 'result: a claim check to another run’s blob (the bystander’s, still in flight), on a cancelled run',
    queue: 'results',
    body: () => JSON.stringify({ v: 1, t: 'result', run: RUNS.ended, job: 'sum', claim: BYSTANDER_CLAIM }),
    deadLetter: /^malformed result: claim: /,
  },
  {
    name: 'result: a duplicate of a counted item with a different value (the first counted value wins)',
    queue: 'results',
    body: () => resultText(RUNS.target, [okOutcome(0, 999)]),
    target: { duplicates: 1 },
  },
  {
    name: 'result: an oversized body (70 KiB, over the 64 KiB queue limit)',
    queue: 'results',
    body: () => result({ outcomes: [okOutcome(1, 999), { i: 2, ok: false, e: 'x'.repeat(70 * 1024), a: 3 }] }),
    refusedBySend: /over the limit of 49152 bytes/,
  },

  // ── work poison queue: what the leader's drain does with it ──
  {
    name: 'poison: not JSON',
    queue: 'poison',
    body: () => '{"v":1,"t":"poison",',
    deadLetter: /^unreadable message on the poison queue: not JSON$/,
  },
  {
    name: 'poison: a worker’s note base64-encoded',
    queue: 'poison',
    body: () => base64(JSON.stringify({ v: 1, t: 'poison', reason: 'not JSON', body: 'x', run: RUNS.target })),
    deadLetter: /^unreadable message on the poison queue: not JSON: .*base64/,
  },
  {
    name: 'poison: a note of schema version 2',
    queue: 'poison',
    body: () => JSON.stringify({ v: 2, t: 'poison', reason: 'not JSON', body: 'x', run: RUNS.target }),
    deadLetter: /^unreadable message on the poison queue: /,
  },
  {
    // Found by fuzzing ({ seed: -1552350364, path: "176" }): it left a dead letter with a blank reason.
    name: 'poison: a note whose reason is only blanks',
    queue: 'poison',
    body: () => JSON.stringify({ v: 1, t: 'poison', reason: ' \t ', body: '[]', run: RUNS.target }),
    deadLetter: /^unreadable message on the poison queue: reason: a poison note needs a reason that is not blank$/,
  },
  {
    name: 'poison: a note naming no run',
    queue: 'poison',
    body: () => JSON.stringify({ v: 1, t: 'poison', reason: 'a note without a run', body: 'the body a run-less note wraps' }),
    deadLetter: /^a note without a run$/,
    letterBody: 'the body a run-less note wraps',
  },
  {
    name: 'poison: a raw work message past the plan with a count near 2^53',
    queue: 'poison',
    body: () =>
      work({
        first: PLANNED.target,
        count: MAX_SAFE - PLANNED.target,
        items: undefined,
        claim: runKeys.claim(RUNS.target, 'huge'),
      }),
    target: { rejected: 1 },
  },
  {
    name: 'poison: a raw work message of an unknown run',
    queue: 'poison',
    body: () => workText(RUNS.unknown, 1),
    deadLetter: /^unknown run sum\/manual-nobody$/,
  },
  {
    name: 'poison: a raw work message of a cancelled run',
    queue: 'poison',
    body: () => workText(RUNS.ended, 1),
    droppedForEndedRun: true,
  },
];

export interface TableRun {
  cases: Array<{ c: MalformedCase; body: string; refused?: unknown; deliveries: Delivery[] }>;
  letters: DeadLetter[];
  poisonNotes: string[];
}

/**
 * Sends the cases into a hub in the middle of real traffic: half the real work is processed and
 * folded first (so the target's item 0 is counted before its duplicate arrives), then the
 * malformed messages, then the other half, and last the bystander's claim-checked result that
 * was in flight all along. The leader drains until the queues are empty.
 */
export async function runTable(hub: MalformedHub, cases: readonly MalformedCase[]): Promise<TableRun> {
  await hub.seed();
  const lead = hub.term(2);
  const real = hub.realWork();
  const half = Math.ceil(real.length / 2);
  for (const text of real.slice(0, half)) await hub.ports.work.send(text);
  await hub.workerPass();
  await hub.drainAll(lead);

  const sent: TableRun['cases'] = [];
  for (const c of cases) {
    const body = await c.body(hub);
    let refused: unknown;
    try {
      await hub.ports[c.queue].send(body);
    } catch (err) {
      refused = err;
    }
    sent.push({ c, body, refused, deliveries: [] });
  }
  for (const text of real.slice(half)) await hub.ports.work.send(text);
  const deliveries = await hub.workerPass();
  for (const entry of sent) {
    if (entry.c.queue !== 'work') continue;
    // A body no queue would carry, handed over anyway, as a host with another limit would.
    entry.deliveries = entry.refused ? [await hub.deliver(hostEntry(entry.body), 1)] : (deliveries.get(entry.body) ?? []);
  }
  await hub.drainAll(lead);
  await hub.ports.results.send(hub.bystanderClaimResult());
  await hub.drainAll(lead);
  return { cases: sent, letters: await hub.deadLetters(), poisonNotes: [...hub.workerPoison.sent] };
}

/**
 * Every case ended as its row says, nothing is left on any queue, the target run counted each of
 * its items once with the right value, and the unrelated runs came out exactly as without the
 * malformed messages: same counters, full bitset, exact output.
 */
export async function expectTableOutcome(hub: MalformedHub, run: TableRun): Promise<void> {
  const names = { work: hub.ports.poison.name, results: hub.ports.results.name, poison: hub.ports.poison.name };
  let rejected = 0;
  let duplicates = 0;
  let lettersExpected = 0;
  for (const { c, body, refused, deliveries } of run.cases) {
    const label = `case "${c.name}"`;
    if (c.refusedBySend) {
      expect(refused, label).toBeInstanceOf(RangeError);
      expect((refused as Error).message, label).toMatch(c.refusedBySend);
    } else expect(refused, label).toBeUndefined();
    if (c.worker?.kind === 'left') {
      // Every delivery the host makes throws, and it gives up after the last.
      expect(deliveries, label).toHaveLength(hub.ctx.tuning.maxAttempts);
      for (const delivery of deliveries) expect(String((delivery as { threw?: unknown }).threw), label).toMatch(c.worker.reason);
    } else if (c.worker) {
      // One delivery: it neither threw (the host would retry it) nor was retried.
      expect(deliveries, label).toEqual([{ outcome: { kind: c.worker.kind, reason: expect.stringMatching(c.worker.reason) } }]);
    }
    const letters = run.letters.filter((l) => l.body === (c.letterBody ?? truncate(body)));
    if (c.deadLetter) {
      lettersExpected++;
      expect(letters, label).toEqual([
        expect.objectContaining({ queue: names[c.queue], reason: expect.stringMatching(c.deadLetter) }),
      ]);
    } else expect(letters, label).toEqual([]);
    rejected += c.target?.rejected ?? 0;
    duplicates += c.target?.duplicates ?? 0;
  }
  expect(run.letters).toHaveLength(lettersExpected);
  // Every note a worker wrote fits a queue message and says why.
  for (const text of run.poisonNotes) {
    expect(Buffer.byteLength(text)).toBeLessThanOrEqual(MAX_QUEUE_MESSAGE_BYTES);
    expect(poisonNoteSchema.parse(JSON.parse(text)).reason).not.toBe('');
  }
  if (run.cases.some((e) => e.c.droppedForEndedRun)) {
    expect(hub.logs).toContainEqual(expect.stringMatching(/^info deleted \d+ message\(s\) of ended run sum\/manual-ended$/));
  }
  expect(await hub.leftOnQueues()).toBe(0);

  expect(await hub.record(RUNS.ended)).toEqual(hub.seeded.get(RUNS.ended));
  const target = await hub.record(RUNS.target);
  expect(target?.counters).toEqual({ planned: 4, dispatched: 4, succeeded: 4, failed: 0, duplicates, rejected });
  expect(target?.seen).toBe(fullySeen(PLANNED.target));
  for (const [runId, planned] of [
    [RUNS.bystander, PLANNED.bystander],
    [RUNS.other, PLANNED.other],
  ] as const) {
    const record = await expectAllCounted(hub, runId, planned);
    expect(record?.seen, runId).toBe(fullySeen(planned));
    expect(record?.acc, runId).toEqual(expectedSum(planned));
    expect(record?.failureParts, runId).toEqual([]);
  }

  // All three open runs finish with the output their items alone make.
  const lead = hub.term(2);
  for (const [runId, planned] of [
    [RUNS.target, PLANNED.target],
    [RUNS.bystander, PLANNED.bystander],
    [RUNS.other, PLANNED.other],
  ] as const) {
    const output = await hub.finalize(lead, runId);
    expect(output, runId).toMatchObject({ runId, state: 'succeeded', output: expectedSum(planned) });
  }
}

/**
 * Messages carry no epoch, so no message is stale by itself: what can be stale is the leader
 * folding it. Results wait on the queue while a newer leader (epoch 3) takes over and writes
 * every open run once; the old leader (epoch 2) then cannot fold them: its cached records give
 * ConcurrentUpdateError (run by run, so each run's results are left queued), the reloaded ones
 * StaleEpochError, which ends its pass. Nothing it did lands, nothing is
 * deleted, and the newer leader counts each item exactly once.
 */
export async function runStaleEpoch(hub: MalformedHub, waitForVisibility: () => Promise<void>): Promise<void> {
  await hub.seed();
  for (const text of hub.realWork()) await hub.ports.work.send(text);
  await hub.workerPass();
  await hub.ports.results.send(hub.bystanderClaimResult());
  const queued = PLANNED.target + PLANNED.bystander + PLANNED.other;
  expect(await hub.ports.results.approximateCount()).toBe(queued);

  const open = [RUNS.target, RUNS.bystander, RUNS.other];
  const old = hub.term(2);
  for (const runId of open) await old.book.get(runId);
  const newer = hub.term(3);
  for (const runId of open) {
    const run = await newer.book.get(runId);
    if (!run || 'terminal' in run || 'unregistered' in run) throw new Error(`run ${runId} is not open`);
    await newer.book.save(run, { ...run.doc.value, updatedAt: hub.clock.date().toISOString() });
  }
  const fenced = await Promise.all(open.map((runId) => hub.records.read(runKeys.record(runId))));
  expect(fenced.map((doc) => doc?.epoch)).toEqual([3, 3, 3]);

  // Its cached records are refused run by run; each run's results are left for a later pass.
  await expect(drainResults(hub.ctx, old.term, old.book)).resolves.toMatchObject({ folded: 0, deferred: queued });
  expect(hub.logs.filter((l) => /^info left \d+ message\(s\) of run .*: ConcurrentUpdate/.test(l))).toHaveLength(open.length);
  await waitForVisibility();
  await expect(drainResults(hub.ctx, old.term, old.book)).rejects.toBeInstanceOf(StaleEpochError);
  expect(await Promise.all(open.map((runId) => hub.records.read(runKeys.record(runId))))).toEqual(fenced);
  expect(await hub.ports.results.approximateCount()).toBe(queued);

  await waitForVisibility();
  await hub.drainAll(newer);
  expect(await hub.leftOnQueues()).toBe(0);
  for (const [runId, planned] of [
    [RUNS.target, PLANNED.target],
    [RUNS.bystander, PLANNED.bystander],
    [RUNS.other, PLANNED.other],
  ] as const) {
    await expectAllCounted(hub, runId, planned);
    const output = await hub.finalize(newer, runId);
    expect(output, runId).toMatchObject({ state: 'succeeded', output: expectedSum(planned) });
  }
  expect(await hub.deadLetters()).toEqual([]);
}

/** Reads a run that must have every item succeeded once, nothing failed, duplicated or rejected. */
async function expectAllCounted(hub: MalformedHub, runId: string, planned: number): Promise<RunRecord | undefined> {
  const record = await hub.record(runId);
  expect(record?.counters, runId).toEqual({
    planned,
    dispatched: planned,
    succeeded: planned,
    failed: 0,
    duplicates: 0,
    rejected: 0,
  });
  return record;
}
