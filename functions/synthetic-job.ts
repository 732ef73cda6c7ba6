import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { z } from 'zod';
import { defineJob, InvalidConfigError, InvalidSettingError, type JobDefinition } from '../src/index';

/**
 * A synthetic job whose output is known in advance, for benchmarks, soak tests and trying Baton
 * out: items 0..n-1, each result 2i, folded to a count, a sum and a sum of squares modulo a
 * prime (an order-independent fingerprint that stays exact: plain float sums past 2^53 are
 * not). Items can fail deterministically, run slowly, or hold the event loop.
 */
const SQUARES_MODULUS = 2_147_483_647;
const addSquare = (squares: number, v: number): number => (squares + ((v * v) % SQUARES_MODULUS)) % SQUARES_MODULUS;
export const syntheticJobSpecSchema = z
  .object({
    name: z.string().min(1).max(63),
    /** NCRONTAB; the default (midnight, 1 January) leaves runs to `baton trigger`. */
    schedule: z.string().default('0 0 0 1 1 *'),
    /** The IANA zone whose wall clock the schedule reads (the job's `timeZone`); UTC unless set. */
    timeZone: z.string().optional(),
    /** Spreads each occurrence's start over this many seconds (the job's `jitterSeconds`). */
    jitterSeconds: z.number().int().min(0).max(3600).optional(),
    items: z.number().int().min(0).max(10_000_000),
    itemsPerMessage: z.number().int().min(1).max(1000).default(1),
    /** Items whose index i has i % failEvery === failEvery - 1 always fail. */
    failEvery: z.number().int().min(1).optional(),
    /** Items whose index i has i % slowEvery === slowEvery - 1 take `slowMs`. */
    slowEvery: z.number().int().min(1).optional(),
    slowMs: z.number().int().min(0).max(600_000).default(0),
    /** Each item that is not slow takes this long (none by default), so that slow ones are slow beside real work. */
    itemMs: z.number().int().min(0).max(600_000).optional(),
    /**
     * Each item first spins this long in a synchronous loop (none by default): CPU-bound work that
     * holds its process's event loop, so that nothing else there (timers, a leader's renewals and
     * run starts, other items) runs meanwhile. `itemMs` and `slowMs` wait without blocking, and
     * follow it.
     */
    blockMs: z.number().int().min(0).max(60_000).optional(),
    failureTolerance: z
      .object({
        count: z.number().int().min(0, { error: 'must be 0 or more (failed items a run may have and still succeed)' }).optional(),
        percent: z.number().min(0, { error: 'must be 0-100' }).max(100, { error: 'must be 0-100' }).optional(),
      })
      .strict()
      .optional(),
    timeoutSeconds: z.number().int().min(1).optional(),
    /** The job's hook time bounds (`defineJob`'s `hookTimeouts`, which checks them). */
    hookTimeouts: z
      .object({
        splitSeconds: z.number().optional(),
        processSeconds: z.number().optional(),
        finalizeSeconds: z.number().optional(),
        graceSeconds: z.number().optional(),
        maxSplitTimeouts: z.number().optional(),
      })
      .strict()
      .optional(),
    /** How often and how soon a failed item is tried again (`defineJob`'s `retry`, which checks it). */
    retry: z
      .object({
        attempts: z.number().optional(),
        delaySeconds: z.number().optional(),
        backoff: z.number().optional(),
        maxDelaySeconds: z.number().optional(),
      })
      .strict()
      .optional(),
    /** Hedged dispatch (`defineJob`'s `hedge`, which checks it): `false` turns it off. */
    hedge: z
      .union([z.literal(false), z.object({ maxPercent: z.number().optional(), minWaitSeconds: z.number().optional() }).strict()])
      .optional(),
    /**
     * A folder of hang orders, for the chaos soak: while the file `hangOrderName(...)` names
     * exists there, that call of `split`, `process` (of one item) or `finalize` never settles and
     * ignores its abort signal, as a hook stuck on a dead connection does.
     */
    hangOrders: z.string().min(1).optional(),
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

/** Why a synthetic item that fails by design failed, as its worker reports it. */
export const SYNTHETIC_FAILURE = /^Error: synthetic item \d+ fails by design$/;

/** The file in `hangOrders` that makes one hook call of one run hang (`item` for `process`). */
export function hangOrderName(runId: string, hook: 'split' | 'process' | 'finalize', item?: number): string {
  return `${runId.replace(/[^A-Za-z0-9.-]/g, '_')}.${hook}${item === undefined ? '' : `.${item}`}`;
}

/** Holds the event loop for `ms`: a busy loop, as CPU-bound code does, not a wait. */
function spin(ms: number): void {
  const until = performance.now() + ms;
  while (performance.now() < until) {
    // Nothing: the point is that nothing else in the process runs.
  }
}

/** Never settles, whatever the signal says. */
const hang = (): Promise<never> => new Promise<never>(() => undefined);

export function createSyntheticJob(spec: SyntheticJobSpec): JobDefinition {
  const s: ResolvedSpec = syntheticJobSpecSchema.parse(spec);
  const ordered = (...name: Parameters<typeof hangOrderName>): boolean =>
    s.hangOrders !== undefined && existsSync(join(s.hangOrders, hangOrderName(...name)));
  return defineJob<{ i: number }, { v: number }, SyntheticOutput>({
    name: s.name,
    schedule: s.schedule,
    ...(s.timeZone ? { timeZone: s.timeZone } : {}),
    ...(s.jitterSeconds ? { jitterSeconds: s.jitterSeconds } : {}),
    itemsPerMessage: s.itemsPerMessage,
    ...(s.failureTolerance ? { failureTolerance: s.failureTolerance } : {}),
    ...(s.timeoutSeconds ? { timeoutSeconds: s.timeoutSeconds } : {}),
    ...(s.hookTimeouts ? { hookTimeouts: s.hookTimeouts } : {}),
    ...(s.retry ? { retry: s.retry } : {}),
    ...(s.hedge !== undefined ? { hedge: s.hedge } : {}),
    itemSchema: z.object({ i: z.number().int().min(0) }),
    resultSchema: z.object({ v: z.number() }),
    split:
      s.hangOrders === undefined
        ? function* () {
            for (let i = 0; i < s.items; i++) yield { i };
          }
        : async function* (ctx) {
            if (ordered(ctx.runId, 'split')) await hang();
            for (let i = 0; i < s.items; i++) yield { i };
          },
    async process(item, ctx) {
      if (ordered(ctx.runId, 'process', item.i)) await hang();
      if (s.blockMs) spin(s.blockMs);
      const ms = everyNth(s.slowEvery, item.i) ? s.slowMs : (s.itemMs ?? 0);
      if (ms > 0) await sleep(ms, undefined, { signal: ctx.signal });
      if (everyNth(s.failEvery, item.i)) throw new Error(`synthetic item ${item.i} fails by design`);
      return { v: 2 * item.i };
    },
    aggregate: {
      initial: () => ({ count: 0, sum: 0, squares: 0 }),
      add: (acc, result) => ({ count: acc.count + 1, sum: acc.sum + result.v, squares: addSquare(acc.squares, result.v) }),
      // Two disjoint folds combine by adding each part (the squares modulo the same prime), for the durable engine.
      merge: (a, b) => ({ count: a.count + b.count, sum: a.sum + b.sum, squares: (a.squares + b.squares) % SQUARES_MODULUS }),
    },
    // Only a job that takes hang orders has a finalize hook: one that does nothing unless told to hang.
    ...(s.hangOrders !== undefined
      ? {
          async finalize(_output: SyntheticOutput, ctx: { runId: string }) {
            if (ordered(ctx.runId, 'finalize')) await hang();
          },
        }
      : {}),
  });
}

/**
 * What a run of `spec` must output, and which item indexes must fail; `alsoFailing` are items
 * that fail in this run besides those that fail by design (a hung `process`).
 */
export function expectedSynthetic(
  spec: SyntheticJobSpec,
  alsoFailing: readonly number[] = [],
): { output: SyntheticOutput; failed: number[] } {
  const s = syntheticJobSpecSchema.parse(spec);
  const output = { count: 0, sum: 0, squares: 0 };
  const failed: number[] = [];
  const extra = new Set(alsoFailing);
  for (let i = 0; i < s.items; i++) {
    if (everyNth(s.failEvery, i) || extra.has(i)) {
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
export function parseSyntheticJobs(env: NodeJS.ProcessEnv): SyntheticJobSpec[] {
  const raw = env.BATON_SYNTHETIC_JOBS?.trim();
  if (!raw) return [];
  const setting = 'BATON_SYNTHETIC_JOBS';
  const fail = (message: string): never => {
    throw new InvalidSettingError(setting, message.replace(/\s+/g, ' '));
  };
  let json: unknown;
  try {
    json = JSON.parse(raw);
  } catch {
    // The parser's message quotes the text; say only what is wrong.
    return fail(`${setting} must be a JSON array of job specs such as [{"name":"sum","items":2000}]; it is not valid JSON`);
  }
  if (!Array.isArray(json)) {
    return fail(`${setting} is invalid: it must be a JSON array of job specs such as [{"name":"sum","items":2000}]`);
  }
  const parsed = z.array(syntheticJobSpecSchema).safeParse(json);
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    const [index, ...path] = issue.path;
    const name = typeof index === 'number' ? (json[index] as { name?: unknown } | null)?.name : undefined;
    const job = typeof name === 'string' && /^[a-z0-9-]{1,63}$/.test(name) ? ` (job ${name})` : '';
    return fail(`${setting} is invalid at ${[index, ...path].join('.')}${job}: ${issue.message}`);
  }
  const seen = new Set<string>();
  for (const [index, spec] of parsed.data.entries()) {
    try {
      // The job's own rules (its name, schedule and tolerance), so a bad spec stops start-up here, naming the setting.
      createSyntheticJob(spec);
    } catch (err) {
      if (!(err instanceof InvalidConfigError)) throw err;
      // A message that opens with the option (`sum.schedule "…" is not…`) names the spec's field instead.
      const own = `${spec.name}.`;
      if (err.option.startsWith(own) && err.message.startsWith(err.option)) {
        return fail(`${setting}.${index}.${err.option.slice(own.length)}${err.message.slice(err.option.length)}`);
      }
      return fail(`${setting} is invalid at ${index}: ${err.message}`);
    }
    if (seen.has(spec.name)) {
      return fail(`${setting} is invalid at ${index}: job ${spec.name} is listed twice; names must be unique`);
    }
    seen.add(spec.name);
  }
  return parsed.data;
}
