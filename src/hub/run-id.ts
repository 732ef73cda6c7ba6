import { InvalidRunIdError } from '../errors';
import { JOB_NAME_PATTERN } from '../jobs/define-job';

/**
 * A run id is `<job>/<occurrence or manual-id>`, as `scheduledRunId` and `manualRunId` make them:
 * a job name, then one segment of letters, digits and `:._-` (an ISO instant, `manual-<uuid>`,
 * `manual-k-<hash>`). Every blob of a run is named under `runs/<run id>/`, and storage resolves
 * `.` and `..` in blob names, so an id from outside (an app's endpoint, the library client, a
 * request blob) is checked against this rule before it names anything.
 */
const RUN_SEGMENT = /^[A-Za-z0-9][A-Za-z0-9:._-]{0,199}$/;

/** Whether `id` may follow `manual-` in a manual run's id (a request's `id`). */
export function isManualSegment(id: unknown): id is string {
  return typeof id === 'string' && RUN_SEGMENT.test(`manual-${id}`);
}

/** Whether `id` is a run id by the rule above. */
export function isRunId(id: unknown): id is string {
  if (typeof id !== 'string') return false;
  const slash = id.indexOf('/');
  if (slash < 0) return false;
  return JOB_NAME_PATTERN.test(id.slice(0, slash)) && RUN_SEGMENT.test(id.slice(slash + 1));
}

/** `id`, if it is a run id; otherwise an `InvalidRunIdError` saying what one looks like. */
export function checkRunId(id: unknown): string {
  if (isRunId(id)) return id;
  const shown = JSON.stringify(typeof id === 'string' ? id.slice(0, 120) : String(id));
  throw new InvalidRunIdError(
    typeof id === 'string' ? id : String(id),
    `${shown} is not a run id: <job>/<occurrence or manual-id>, such as nightly/2026-01-01T02:00:00.000Z`,
  );
}
