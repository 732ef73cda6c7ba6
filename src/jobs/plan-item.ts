import { checkSchema } from './job-schema';
import type { JobDefinition } from './job-definition';

/** A split that cannot be planned: it fails its run with this message. */
export class PlanError extends Error {
  override name = 'PlanError';
}

/** One planned item as its NDJSON line: the item schema, JSON, and `maxItemBytes`; a bad item throws `PlanError` naming it. */
export function serializeItem(job: JobDefinition, item: unknown, index: number): string {
  let value = item;
  if (job.itemSchema) {
    const checked = checkSchema(job.itemSchema, item);
    if (!checked.ok) throw new PlanError(`item ${index} does not match the job's item schema: ${checked.problem}`);
    value = checked.value;
  }
  const line = JSON.stringify(value);
  if (line === undefined) throw new PlanError(`item ${index} is not JSON (${typeof item})`);
  // One item too big fails the plan rather than the item: it is the split's bug, and it would fail every attempt.
  const bytes = Buffer.byteLength(line);
  if (bytes > job.maxItemBytes) {
    throw new PlanError(`item ${index} is ${bytes} bytes as JSON, over the job's maxItemBytes (${job.maxItemBytes})`);
  }
  return line;
}
