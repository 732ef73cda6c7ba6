import { systemClock, type Clock } from '../clock/clock';
import { callHook } from './call-hook';
import { errorText } from './error-text';
import type { ItemOutcome } from './item-outcome';
import type { JobDefinition } from './job-definition';
import { checkSchema } from './job-schema';
import { describeThrown, messageOf } from '../errors';

/** One item through the job: size, item schema, `process`, result schema, JSON, size. A failure is an outcome, never a throw. */
export async function processItem(
  job: JobDefinition,
  item: unknown,
  ctx: { runId: string; itemIndex: number; attempt: number; signal: AbortSignal },
  clock: Clock = systemClock,
): Promise<ItemOutcome> {
  const fail = (e: string): ItemOutcome => ({ i: ctx.itemIndex, ok: false, e: errorText(e), a: ctx.attempt });
  // The leader checks this when planning; a message from anywhere else is checked here too.
  const itemBytes = jsonBytes(item);
  if (itemBytes > job.maxItemBytes) {
    return fail(`item is ${itemBytes} bytes as JSON, over the job's maxItemBytes (${job.maxItemBytes})`);
  }
  if (job.itemSchema) {
    const checked = checkSchema(job.itemSchema, item);
    if (!checked.ok) return fail(`item does not match the job's item schema: ${checked.problem}`);
    item = checked.value;
  }
  let result: unknown;
  try {
    const checkedItem = item;
    const { processSeconds, graceSeconds } = job.hookTimeouts;
    result = await callHook((signal) => job.process(checkedItem, { ...ctx, signal }), {
      hook: 'process',
      timeoutMs: processSeconds * 1000,
      graceMs: graceSeconds * 1000,
      clock,
      signal: ctx.signal,
    });
  } catch (err) {
    return fail(describeThrown(err));
  }
  if (job.resultSchema) {
    const checked = checkSchema(job.resultSchema, result);
    if (!checked.ok) return fail(`result does not match the job's result schema: ${checked.problem}`);
    result = checked.value;
  }
  if (result === undefined) result = null; // JSON has no undefined
  // Reported as this item's failure, not thrown: a result that cannot be sent must not fail its neighbours.
  let resultBytes: number;
  try {
    resultBytes = jsonBytes(result);
  } catch (err) {
    return fail(`result is not JSON: ${messageOf(err)}`);
  }
  if (Number.isNaN(resultBytes)) return fail(`result is not JSON (${typeof result})`);
  if (resultBytes > job.maxResultBytes) {
    return fail(`result is ${resultBytes} bytes as JSON, over the job's maxResultBytes (${job.maxResultBytes})`);
  }
  return { i: ctx.itemIndex, ok: true, r: result };
}

/** UTF-8 bytes of `value` as JSON; NaN when JSON has no form for it (a function). Throws on BigInt or a cycle. */
export function jsonBytes(value: unknown): number {
  const text = JSON.stringify(value);
  return text === undefined ? NaN : Buffer.byteLength(text);
}
