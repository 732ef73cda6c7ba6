/**
 * A job's schemas come from the app's own validation library: any Standard Schema, whichever copy
 * of zod (or another library) made it. `zod/v3` and `zod/mini` stand for a copy other than Baton's
 * own: neither is an instance of Baton's `z.ZodType`, which is what `defineJob` once required.
 */
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import * as zm from 'zod/mini';
import { z as z3 } from 'zod/v3';
import type { StandardSchemaV1 } from '@standard-schema/spec';
import { Bitset } from '../../../src/hub/bitset';
import { foldOutcomes } from '../../../src/hub/fold';
import { defineJob } from '../../../src/jobs/define-job';
import type { JobDefinition } from '../../../src/jobs/job-definition';
import { checkSchema, isJobSchema, type JobSchema } from '../../../src/jobs/job-schema';
import { PlanError, serializeItem } from '../../../src/jobs/plan-item';
import { processItem } from '../../../src/jobs/process-item';

/** A Standard Schema by hand, for what no library here does: answer with a promise, or throw. */
function handMade(validate: StandardSchemaV1['~standard']['validate']): StandardSchemaV1 {
  return { '~standard': { version: 1, vendor: 'hand-made', validate } };
}

const ITEM_SCHEMAS: [string, JobSchema<{ i: number }>][] = [
  ["Baton's own zod", z.object({ i: z.number() })],
  ['zod 3 (another copy)', z3.object({ i: z3.number() })],
  ['zod mini', zm.object({ i: zm.number() })],
];

function job(itemSchema: JobSchema<{ i: number }>, resultSchema?: JobSchema<number>): JobDefinition {
  return defineJob({
    name: 'tally',
    schedule: '0 */5 * * * *',
    split: () => [{ i: 1 }],
    process: (item: { i: number }) => item.i * 2,
    aggregate: { initial: () => 0, add: (acc: number, r: number) => acc + r },
    itemSchema,
    ...(resultSchema ? { resultSchema } : {}),
  }) as JobDefinition;
}

const ctx = () => ({ runId: 'r1', itemIndex: 0, attempt: 1, signal: new AbortController().signal });

describe('job schemas from any Standard Schema library', () => {
  it.each(ITEM_SCHEMAS)('%s: defineJob takes it, and items are checked with it on both sides', async (_name, schema) => {
    const tally = job(schema);
    expect(tally.itemSchema).toBe(schema);
    expect(serializeItem(tally, { i: 3 }, 0)).toBe('{"i":3}');
    expect(() => serializeItem(tally, { i: 'three' }, 7)).toThrow(PlanError);
    expect(() => serializeItem(tally, { i: 'three' }, 7)).toThrow(/^item 7 does not match the job's item schema: i: /);
    expect(await processItem(tally, { i: 3 }, ctx())).toEqual({ i: 0, ok: true, r: 6 });
    const failed = await processItem(tally, { i: 'three' }, ctx());
    expect(failed).toMatchObject({ i: 0, ok: false, a: 1 });
    expect(failed.ok ? '' : failed.e).toMatch(/^item does not match the job's item schema: i: \S/);
  });

  it("uses the schema's output: a transform in another copy of zod reaches process", async () => {
    const tally = job(z3.object({ i: z3.string().transform(Number) }) as unknown as JobSchema<{ i: number }>);
    expect(await processItem(tally, { i: '21' }, ctx())).toEqual({ i: 0, ok: true, r: 42 });
  });

  it('a result schema from another copy fails a bad result at the worker and again at the fold', async () => {
    const tally = job(ITEM_SCHEMAS[1]![1], z3.number().int());
    const atWorker = await processItem({ ...tally, process: () => 2.5 }, { i: 1 }, ctx());
    expect(atWorker.ok ? '' : atWorker.e).toMatch(/^result does not match the job's result schema: \S/);
    const folded = foldOutcomes(
      tally,
      {
        acc: 0,
        seen: Bitset.empty(2),
        counters: { planned: 2, dispatched: 2, succeeded: 0, failed: 0, duplicates: 0, rejected: 0 },
      },
      [
        { i: 0, ok: true, r: 4 },
        { i: 1, ok: true, r: 2.5 },
      ],
    );
    expect(folded.acc).toBe(4);
    expect(folded.counters).toMatchObject({ succeeded: 1, failed: 1 });
    expect(folded.failures).toEqual([{ item: 1, reason: "result does not match the job's result schema", attempts: 1 }]);
  });

  it.each<[string, StandardSchemaV1, RegExp]>([
    [
      'answers with a promise',
      handMade((value) => Promise.resolve({ value })),
      /^the schema validates asynchronously; a job schema must answer synchronously$/,
    ],
    [
      'answers with a promise that rejects',
      handMade(() => Promise.reject(new Error('no'))),
      /^the schema validates asynchronously/,
    ],
    [
      'throws',
      handMade(() => {
        throw new Error('cannot read properties of undefined');
      }),
      /^the schema threw: cannot read properties of undefined$/,
    ],
    ['reports an issue with no path', handMade(() => ({ issues: [{ message: 'not allowed' }] })), /^not allowed$/],
    [
      'reports path segments as objects',
      handMade(() => ({ issues: [{ message: 'too long', path: [{ key: 'tags' }, 2] }] })),
      /^tags\.2: too long$/,
    ],
  ])('a schema that %s is a problem named in one line', (_name, schema, problem) => {
    const checked = checkSchema(schema, { i: 1 });
    expect(checked.ok).toBe(false);
    expect(checked.ok ? '' : checked.problem).toMatch(problem);
  });

  it.each<[string, unknown, boolean]>([
    ["Baton's own zod", z.number(), true],
    ['zod 3', z3.number(), true],
    ['zod mini', zm.number(), true],
    ['a hand-made Standard Schema', handMade((value) => ({ value })), true],
    ['an object with parse only', { parse: () => 1 }, false],
    ['a string', 'number', false],
    ['null', null, false],
    ['another version of the standard', { '~standard': { version: 2, vendor: 'x', validate: () => ({ value: 1 }) } }, false],
    ['a standard without validate', { '~standard': { version: 1, vendor: 'x' } }, false],
  ])('isJobSchema(%s) is %s', (_name, value, expected) => {
    expect(isJobSchema(value)).toBe(expected);
  });
});
