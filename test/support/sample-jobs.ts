import { z } from 'zod';
import { defineJob } from '../../src/jobs/define-job';
import type { HedgeOptions, HookTimeouts, JobOptions } from '../../src/jobs/job-definition';
import type { ItemRetryOptions } from '../../src/jobs/retry-policy';

export interface SumAcc {
  count: number;
  sum: number;
  /** Order-independent fingerprint: sum of squares. */
  squares: number;
}

/** A job whose output is known in advance: items 0..n-1, results 2i, folded to count/sum/squares. */
export function sumJob(options: {
  name?: string;
  items: number;
  failWhen?: (i: number) => boolean;
  itemsPerMessage?: number;
  failureTolerance?: { count?: number; percent?: number };
  overlap?: 'skip' | 'allow' | 'replace';
  schedule?: string;
  timeZone?: string;
  dstGap?: 'run' | 'skip';
  catchUp?: 'latest' | 'all';
  startingDeadlineSeconds?: number;
  jitterSeconds?: number;
  timeoutSeconds?: number;
  pad?: number;
  slowMs?: number;
  hedge?: false | HedgeOptions;
  onItemFailed?: JobOptions<{ i: number; pad?: string }, { v: number }, SumAcc, SumAcc>['onItemFailed'];
  hookTimeouts?: HookTimeouts;
  retry?: ItemRetryOptions;
}) {
  return defineJob<{ i: number; pad?: string }, { v: number }, SumAcc>({
    name: options.name ?? 'sum',
    schedule: options.schedule ?? '0 0 0 1 1 *',
    ...(options.timeZone ? { timeZone: options.timeZone } : {}),
    ...(options.dstGap ? { dstGap: options.dstGap } : {}),
    ...(options.catchUp ? { catchUp: options.catchUp } : {}),
    ...(options.jitterSeconds !== undefined ? { jitterSeconds: options.jitterSeconds } : {}),
    ...(options.startingDeadlineSeconds ? { startingDeadlineSeconds: options.startingDeadlineSeconds } : {}),
    itemsPerMessage: options.itemsPerMessage ?? 1,
    overlap: options.overlap ?? 'skip',
    ...(options.timeoutSeconds ? { timeoutSeconds: options.timeoutSeconds } : {}),
    ...(options.failureTolerance ? { failureTolerance: options.failureTolerance } : {}),
    ...(options.hedge !== undefined ? { hedge: options.hedge } : {}),
    ...(options.onItemFailed ? { onItemFailed: options.onItemFailed } : {}),
    ...(options.hookTimeouts ? { hookTimeouts: options.hookTimeouts } : {}),
    ...(options.retry ? { retry: options.retry } : {}),
    itemSchema: z.object({ i: z.number().int(), pad: z.string().optional() }),
    resultSchema: z.object({ v: z.number() }),
    *split() {
      for (let i = 0; i < options.items; i++) yield options.pad ? { i, pad: 'x'.repeat(options.pad) } : { i };
    },
    async process(item) {
      if (options.slowMs) await new Promise((r) => setTimeout(r, options.slowMs));
      if (options.failWhen?.(item.i)) throw new Error(`item ${item.i} is cursed`);
      return { v: 2 * item.i };
    },
    aggregate: {
      initial: () => ({ count: 0, sum: 0, squares: 0 }),
      add: (acc, result) => ({ count: acc.count + 1, sum: acc.sum + result.v, squares: acc.squares + result.v * result.v }),
    },
  });
}

/** The aggregate computed directly from the items, to compare outputs against. */
export function expectedSum(items: number, skip: (i: number) => boolean = () => false): SumAcc {
  const acc = { count: 0, sum: 0, squares: 0 };
  for (let i = 0; i < items; i++) {
    if (skip(i)) continue;
    acc.count++;
    acc.sum += 2 * i;
    acc.squares += 4 * i * i;
  }
  return acc;
}
