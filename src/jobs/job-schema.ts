import type { StandardSchemaV1 } from '@standard-schema/spec';
import { describeIssues } from './error-text';
import { messageOf } from '../errors';

/**
 * A job's item or result schema: anything that implements Standard Schema v1, so a schema made
 * with the app's own copy of zod (3.24 and later, 4, mini), valibot or arktype is taken as it is.
 * Checking by `instanceof` against Baton's own zod refused every schema from another copy.
 */
export type JobSchema<T> = StandardSchemaV1<unknown, T>;

/** The outcome of one check: the schema's output, or the first problem as one short line. */
export type SchemaCheck<T> = { ok: true; value: T } | { ok: false; problem: string };

/** Whether `value` implements Standard Schema v1 (what `defineJob` asks of a schema). */
export function isJobSchema(value: unknown): value is JobSchema<unknown> {
  if ((typeof value !== 'object' && typeof value !== 'function') || value === null) return false;
  const props = (value as Partial<StandardSchemaV1>)['~standard'];
  return typeof props === 'object' && props !== null && props.version === 1 && typeof props.validate === 'function';
}

/**
 * Checks `value` against `schema`. Items are planned and results folded one at a time and in
 * order, so a schema must answer at once: one that answers with a promise is a problem named
 * as such, as is one that throws.
 */
export function checkSchema<T>(schema: JobSchema<T>, value: unknown): SchemaCheck<T> {
  let result: StandardSchemaV1.Result<T> | Promise<StandardSchemaV1.Result<T>>;
  try {
    result = schema['~standard'].validate(value);
  } catch (err) {
    return { ok: false, problem: `the schema threw: ${messageOf(err)}` };
  }
  if (isPromiseLike(result)) {
    // Nothing will read it; without a handler a rejection would surface as unhandled.
    result.then(undefined, () => {});
    return { ok: false, problem: 'the schema validates asynchronously; a job schema must answer synchronously' };
  }
  if (result.issues) return { ok: false, problem: describeIssues(result.issues) };
  return { ok: true, value: result.value };
}

function isPromiseLike<T>(value: T | PromiseLike<T>): value is PromiseLike<T> {
  return typeof (value as Partial<PromiseLike<T>>).then === 'function';
}
