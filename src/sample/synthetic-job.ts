import { setTimeout as sleep } from 'node:timers/promises';
import { z } from 'zod';
import { InvalidSettingError } from '../errors';
import { defineJob } from '../jobs/define-job';
import type { JobDefinition } from '../jobs/job-definition';
import { Schedule } from '../schedule/schedule';
import type { Env } from '../storage/settings';

/**
 * A synthetic job whose output is known in advance, for benchmarks, soak tests and trying Baton
 * out: items 0..n-1, each result 2i, folded to a count, a sum and a sum of squares modulo a
 * prime (an order-independent fingerprint that stays exact: plain float sums past 2^53 are
 * not). Items can fail deterministically or run slowly.
 */
const SQUARES_MODULUS = 2_147_483_647;
const addSquare = (squares: number, v: number): number => (squares + ((v * v) % SQUARES_MODULUS)) % SQUARES_MODULUS;
export const syntheticJobSpecSchema = z
  .object({
    name: z.string().min(1).max(63),
    /** NCRONTAB; the default (midnight, 1 January) leaves runs to `baton trigger`. */
    schedule: z.string().default('0 0 0 1 1 *'),
    items: z.number().int().min(0).max(10_000_000),
    itemsPerMessage: z.number().int().min(1).max(1000).default(1),
    /** Items whose index i has i % failEvery === failEvery - 1 always fail. */
    failEvery: z.number().int().min(1).optional(),
    /** Items whose index i has i % slowEvery === slowEvery - 1 take `slowMs`. */
    slowEvery: z.number().int().min(1).optional(),
    slowMs: z.number().int().min(0).max(600_000).default(0),
    failureTolerance: z
      .object({ count: z.number().int().min(0).optional(), percent: z.number().min(0).max(100).optional() })
      .optional(),
    timeoutSeconds: z.number().int().min(1).optional(),
  })
  .strict();
export type SyntheticJobSpec = z.input<typeof syntheticJobSpecSchema>;
type ResolvedSpec = z.output<typeof syntheticJobSpecSchema>;

export interface SyntheticOutput {
  count: number;
  sum: number;
  squares: number;
}

const everyNth = (n: number | undefined, i: number): boolean => n !== undefined && i % n === n - 1;

export function createSyntheticJob(spec: SyntheticJobSpec): JobDefinition {
  const s: ResolvedSpec = syntheticJobSpecSchema.parse(spec);
  return defineJob<{ i: number }, { v: number }, SyntheticOutput>({
    name: s.name,
    schedule: s.schedule,
    itemsPerMessage: s.itemsPerMessage,
    ...(s.failureTolerance ? { failureTolerance: s.failureTolerance } : {}),
    ...(s.timeoutSeconds ? { timeoutSeconds: s.timeoutSeconds } : {}),
    itemSchema: z.object({ i: z.number().int().min(0) }),
    resultSchema: z.object({ v: z.number() }),
    *split() {
      for (let i = 0; i < s.items; i++) yield { i };
    },
    async process(item, ctx) {
      if (everyNth(s.slowEvery, item.i) && s.slowMs > 0) await sleep(s.slowMs, undefined, { signal: ctx.signal });
      if (everyNth(s.failEvery, item.i)) throw new Error(`synthetic item ${item.i} fails by design`);
      return { v: 2 * item.i };
    },
    aggregate: {
      initial: () => ({ count: 0, sum: 0, squares: 0 }),
      add: (acc, result) => ({ count: acc.count + 1, sum: acc.sum + result.v, squares: addSquare(acc.squares, result.v) }),
    },
  });
}

/** What a run of `spec` must output, and which item indexes must fail. */
export function expectedSynthetic(spec: SyntheticJobSpec): { output: SyntheticOutput; failed: number[] } {
  const s = syntheticJobSpecSchema.parse(spec);
  const output = { count: 0, sum: 0, squares: 0 };
  const failed: number[] = [];
  for (let i = 0; i < s.items; i++) {
    if (everyNth(s.failEvery, i)) {
      failed.push(i);
      continue;
    }
    output.count++;
    output.sum += 2 * i;
    output.squares = addSquare(output.squares, 2 * i);
  }
  return { output, failed };
}

/**
 * `BATON_SYNTHETIC_JOBS`: a JSON array of synthetic job specs to register beside the app's own
 * jobs (none when unset). A bad value fails start-up with one line naming the setting.
 */
export function parseSyntheticJobs(env: Env): SyntheticJobSpec[] {
  const raw = env.BATON_SYNTHETIC_JOBS?.trim();
  if (!raw) return [];
  let json: unknown;
  try {
    json = JSON.parse(raw);
  } catch {
    throw new InvalidSettingError('BATON_SYNTHETIC_JOBS', 'BATON_SYNTHETIC_JOBS must be a JSON array of job specs');
  }
  const parsed = z.array(syntheticJobSpecSchema).safeParse(json);
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    const where = issue.path.length > 0 ? ` at ${issue.path.join('.')}` : '';
    throw new InvalidSettingError('BATON_SYNTHETIC_JOBS', `BATON_SYNTHETIC_JOBS is invalid${where}: ${issue.message}`);
  }
  for (const [index, spec] of parsed.data.entries()) {
    try {
      Schedule.parse(spec.schedule, `BATON_SYNTHETIC_JOBS.${index}.schedule`);
    } catch (err) {
      throw new InvalidSettingError('BATON_SYNTHETIC_JOBS', err instanceof Error ? err.message : String(err));
    }
  }
  return parsed.data;
}
