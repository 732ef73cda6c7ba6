import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import type { DrainStats } from '../../../src/engine/drain';
import { poisonNoteSchema, workMessageSchema } from '../../../src/engine/messages';
import type { QueuePort } from '../../../src/queue/queue-port';
import { runKeys, type RunRecord } from '../../../src/hub/run-record';
import {
  BYSTANDER_CLAIM,
  failOnUnhandledRejections,
  hostEntry,
  inMemoryHub,
  MalformedHub,
  okOutcome,
  RUNS,
  type Delivery,
} from '../../support/malformed-hub';
import { propertyParameters } from '../../support/fuzz';

failOnUnhandledRejections();

const NUM_RUNS = 1000;

/** Counterexamples fuzzing found, replayed first on every run (see test/support/fuzz.ts). */
const POISON_COUNTEREXAMPLES: Array<[string]> = [
  // { seed: -1552350364, path: "176" }: a whitespace-only reason left a dead letter with no reason.
  ['{"v":1,"t":"poison","reason":" ","body":"[]"}'],
];
const BYSTANDER_COUNTED = 3;
const MAX_SAFE = Number.MAX_SAFE_INTEGER;

/** Claim-check blobs the near misses can point at: good ones of the target and the ended run, a garbled one, another run's. */
const CLAIMS = {
  targetItems: runKeys.claim(RUNS.target, 'items-2'),
  targetOutcomes: runKeys.claim(RUNS.target, 'outcomes-2'),
  targetGarbled: runKeys.claim(RUNS.target, 'garbled'),
  endedOutcomes: runKeys.claim(RUNS.ended, 'outcomes-0'),
};

async function freshHub(): Promise<MalformedHub> {
  const { hub } = inMemoryHub();
  await hub.seed({ bystanderCounted: BYSTANDER_COUNTED });
  const docs = hub.ports.docs;
  await docs.write(CLAIMS.targetItems, JSON.stringify([{ i: 2 }]), {});
  await docs.write(CLAIMS.targetOutcomes, JSON.stringify([okOutcome(2)]), {});
  await docs.write(CLAIMS.targetGarbled, '[{"i":', {});
  await docs.write(CLAIMS.endedOutcomes, JSON.stringify([okOutcome(0)]), {});
  return hub;
}

// ── generators ──

const base64 = (text: string) => Buffer.from(text, 'utf8').toString('base64');

const RUN_POOL = [
  RUNS.target,
  RUNS.ended,
  RUNS.unknown,
  'sum/../sum/manual-target',
  'sum/./manual-target',
  'sum//manual-target',
  'tally/manual-nobody',
  '',
  `sum/manual-${'x'.repeat(600)}`,
];
const CLAIM_POOL = [
  ...Object.values(CLAIMS),
  runKeys.claim(RUNS.target, 'missing'),
  BYSTANDER_CLAIM,
  runKeys.record(RUNS.target),
  `${runKeys.claimsPrefix(RUNS.target)}../../manual-bystander/claims/in-flight.json`,
  '',
];
const DELETE = Symbol('delete');

/** A replacement for one field: gone, a neighbour of a good value, another type, or anything. */
const wild: fc.Arbitrary<unknown> = fc.oneof(
  fc.constant(DELETE),
  fc.constantFrom<unknown>(
    null,
    true,
    false,
    0,
    1,
    2,
    3,
    4,
    5,
    -1,
    1.5,
    2 ** 31,
    MAX_SAFE,
    -MAX_SAFE,
    '',
    'work',
    'result',
    'poison',
  ),
  fc.constantFrom(...RUN_POOL),
  fc.constantFrom(...CLAIM_POOL),
  fc.integer(),
  fc.double(),
  fc.string(),
  fc.jsonValue({ maxDepth: 2 }),
  fc.array(fc.jsonValue({ maxDepth: 1 }), { maxLength: 5 }),
);

type Json = Record<string, unknown>;

const WORK_TEMPLATES: Json[] = [
  { v: 1, t: 'work', run: RUNS.target, job: 'sum', first: 1, count: 1, items: [{ i: 1 }] },
  { v: 1, t: 'work', run: RUNS.target, job: 'sum', first: 0, count: 2, items: [{ i: 0 }, { i: 1 }] },
  { v: 1, t: 'work', run: RUNS.target, job: 'sum', first: 2, count: 1, claim: CLAIMS.targetItems },
  { v: 1, t: 'work', run: RUNS.ended, job: 'sum', first: 0, count: 1, items: [{ i: 0 }] },
];
const RESULT_TEMPLATES: Json[] = [
  { v: 1, t: 'result', run: RUNS.target, job: 'sum', outcomes: [okOutcome(1)] },
  { v: 1, t: 'result', run: RUNS.target, job: 'sum', outcomes: [{ i: 3, ok: false, e: 'boom', a: 3 }, okOutcome(2)] },
  { v: 1, t: 'result', run: RUNS.target, job: 'sum', claim: CLAIMS.targetOutcomes },
  { v: 1, t: 'result', run: RUNS.ended, job: 'sum', claim: CLAIMS.endedOutcomes },
  { v: 1, t: 'result', run: RUNS.ended, job: 'sum', outcomes: [okOutcome(0)] },
];
const NOTE_TEMPLATES: Json[] = [
  { v: 1, t: 'poison', reason: 'not JSON', body: '{"v":1', run: RUNS.target },
  { v: 1, t: 'poison', reason: 'unknown run', body: '{}', run: RUNS.unknown },
  { v: 1, t: 'poison', reason: 'wrong shape', body: '[]' },
];

/** Every field and element path of a value, and a field it does not have. */
function pathsOf(value: unknown, prefix: Array<string | number> = []): Array<Array<string | number>> {
  const out: Array<Array<string | number>> = prefix.length ? [prefix] : [];
  if (Array.isArray(value)) value.forEach((v, i) => out.push(...pathsOf(v, [...prefix, i])));
  else if (value !== null && typeof value === 'object') {
    for (const [k, v] of Object.entries(value)) out.push(...pathsOf(v, [...prefix, k]));
    out.push([...prefix, 'extra']);
  }
  return out;
}

function mutate(template: Json, path: Array<string | number>, replacement: unknown): string {
  const copy = structuredClone(template);
  let parent: unknown = copy;
  for (const key of path.slice(0, -1)) parent = (parent as Record<string | number, unknown>)[key];
  const last = path[path.length - 1] as string | number;
  if (Array.isArray(parent) && typeof last === 'number') {
    if (replacement === DELETE) parent.splice(last, 1);
    else parent[last] = replacement;
  } else if (parent !== null && typeof parent === 'object') {
    const record = parent as Record<string, unknown>;
    if (replacement === DELETE) delete record[last];
    else record[last] = replacement;
  }
  return JSON.stringify(copy);
}

/** A valid message with one field changed: the zod paths, not only JSON.parse. */
function nearMiss(templates: Json[]): fc.Arbitrary<string> {
  return fc
    .constantFrom(...templates)
    .chain((template) => fc.tuple(fc.constant(template), fc.constantFrom(...pathsOf(template)), wild))
    .map(([template, path, replacement]) => mutate(template, path, replacement));
}

/** Text that is no message at all. */
const junk: fc.Arbitrary<string> = fc.oneof(
  fc.string({ unit: 'binary', maxLength: 120 }),
  fc.string({ unit: 'grapheme-ascii', maxLength: 120 }),
  fc.json({ maxDepth: 3 }),
  fc.base64String({ maxLength: 120 }),
);

/** Junk, near misses, and near misses base64-encoded (a sender on the wrong message encoding). */
function bodies(templates: Json[]): fc.Arbitrary<string> {
  const near = nearMiss(templates);
  return fc.oneof({ arbitrary: junk, weight: 2 }, { arbitrary: near, weight: 5 }, { arbitrary: near.map(base64), weight: 1 });
}

// ── what must hold after every message ──

const counted = (r: RunRecord | undefined) =>
  r ? r.counters.succeeded + r.counters.failed + r.counters.duplicates + r.counters.rejected : 0;

/**
 * The message was accounted for: a dead letter with a reason, a count on the target run, or (for
 * the ended run only) deleted with a log line saying so. Nothing is left on a queue, and the
 * unrelated runs and the ended run are exactly as seeded, the bystander's in-flight claim intact.
 */
async function expectAccounted(hub: MalformedHub, targetBefore: RunRecord | undefined, stats: DrainStats): Promise<void> {
  expect(await hub.leftOnQueues()).toBe(0);
  const letters = await hub.deadLetters();
  for (const letter of letters) expect(letter.reason.trim()).not.toBe('');
  const target = await hub.record(RUNS.target);
  const moved = counted(target) - counted(targetBefore);
  const droppedForEnded =
    stats.stray > 0 && hub.logs.some((l) => l.startsWith('info deleted') && l.endsWith(`of ended run ${RUNS.ended}`));
  expect(
    letters.length > 0 || moved > 0 || droppedForEnded,
    `letters ${letters.length}, target moved ${moved}, stray ${stats.stray}`,
  ).toBe(true);
  expect(target?.counters.planned).toBe(4);
  for (const runId of [RUNS.bystander, RUNS.other, RUNS.ended])
    expect(await hub.record(runId), runId).toEqual(hub.seeded.get(runId));
  expect(await hub.ports.docs.read(BYSTANDER_CLAIM)).toBeDefined();
}

/** Sends `text` to a leader's queue; false when the queue refuses it, which it must do with a reason. */
async function arrive(queue: QueuePort, text: string): Promise<boolean> {
  try {
    await queue.send(text);
    return true;
  } catch (err) {
    expect(err).toBeInstanceOf(RangeError);
    expect((err as Error).message).toMatch(/does not survive the XML wire format|over the limit/);
    return false;
  }
}

describe(`malformed input, ${NUM_RUNS} random messages per property (in memory)`, () => {
  it('the worker handler: junk and near-miss work messages are poisoned or dropped with a reason, or processed when valid', async () => {
    const maxAttempts = 3;
    await fc.assert(
      fc.asyncProperty(
        bodies(WORK_TEMPLATES),
        fc.boolean(),
        fc.integer({ min: 1, max: maxAttempts }),
        async (text, parsedByHost, first) => {
          const hub = await freshHub();
          const entry = parsedByHost ? hostEntry(text) : text;
          // The host's deliveries: a throw is retried, and after the last attempt the host moves the text to poison.
          let delivery: Delivery = await hub.deliver(entry, first);
          for (let attempt = first + 1; 'threw' in delivery && attempt <= maxAttempts; attempt++)
            delivery = await hub.deliver(entry, attempt);
          if ('threw' in delivery) {
            // A job or a kind of message another instance may know (see `fromAnotherVersion`).
            expect(String(delivery.threw)).toMatch(
              /job .* is not registered on this instance|which this version of Baton does not know/,
            );
            await hub.ports.poison.send(text);
          } else {
            const { outcome } = delivery;
            const notes = hub.workerPoison.sent.map((t) => poisonNoteSchema.parse(JSON.parse(t)));
            if (outcome.kind === 'poisoned') {
              expect(outcome.reason.trim()).not.toBe('');
              expect(notes.map((n) => n.reason)).toEqual([outcome.reason]);
            } else {
              expect(notes).toEqual([]);
              if (outcome.kind === 'dropped') expect(outcome.reason).toBe('run is cancelled');
              else {
                // Processed: only a well-formed message of the target gets this far.
                expect(outcome.kind).toBe('processed');
                expect(workMessageSchema.parse(hostEntry(text)).run).toBe(RUNS.target);
              }
            }
            if (outcome.kind === 'dropped') {
              expect(await hub.leftOnQueues()).toBe(0);
              return;
            }
            // Items that failed went back to the work queue: the host delivers their next tries.
            if (outcome.kind === 'processed' && outcome.retrying > 0) await hub.workerPass();
          }
          const targetBefore = await hub.record(RUNS.target);
          const stats = await hub.drainAll(hub.term(2));
          await expectAccounted(hub, targetBefore, stats);
        },
      ),
      propertyParameters('worker handler', NUM_RUNS),
    );
  });

  it("the leader's drain of the results queue: junk and near-miss results are kept as dead letters, counted, or dropped for an ended run", async () => {
    await fc.assert(
      fc.asyncProperty(bodies(RESULT_TEMPLATES), async (text) => {
        const hub = await freshHub();
        if (!(await arrive(hub.ports.results, text))) return;
        const targetBefore = await hub.record(RUNS.target);
        const stats = await hub.drainAll(hub.term(2));
        expect(stats.received).toBe(1);
        await expectAccounted(hub, targetBefore, stats);
      }),
      propertyParameters('results drain', NUM_RUNS),
    );
  });

  it("the leader's drain of the work poison queue: junk, near-miss notes and near-miss raw work messages are accounted for", async () => {
    await fc.assert(
      fc.asyncProperty(fc.oneof(bodies(NOTE_TEMPLATES), bodies(WORK_TEMPLATES)), async (text) => {
        const hub = await freshHub();
        if (!(await arrive(hub.ports.poison, text))) return;
        const targetBefore = await hub.record(RUNS.target);
        const stats = await hub.drainAll(hub.term(2));
        expect(stats.received).toBe(1);
        await expectAccounted(hub, targetBefore, stats);
      }),
      propertyParameters('poison drain', NUM_RUNS, POISON_COUNTEREXAMPLES),
    );
  });
});
