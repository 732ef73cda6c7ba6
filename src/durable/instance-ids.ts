import { createHash } from 'node:crypto';

/**
 * Durable instance ids for runs and chunks. A run's instance id is a pure function of its run
 * id, so every starter that sees an occurrence asks for the same instance and Durable keeps one
 * orchestration per occurrence. Run ids cannot be used as they are: Durable refuses `/`, `\`,
 * `#` and `?` in instance ids and anything over 100 characters.
 */
const MAX_INSTANCE_ID = 100;
/** Room left for a chunk suffix (`~chunk-` and up to 7 digits). */
const MAX_RUN_INSTANCE_ID = MAX_INSTANCE_ID - 14;
const SEPARATOR = '~';
const PLAIN = /^[a-z0-9-]+\/[A-Za-z0-9.:_-]+$/;
const CHUNK = /~chunk-(\d+)$/;

/**
 * `job/2026-11-21T02:00:00.000Z` → `job~2026-11-21T02:00:00.000Z`. Job names hold no `~` and
 * run ids no `~` after the job, so this is one-to-one; run ids with other characters, or too
 * long, become `job~h<128-bit hash>` instead (still deterministic, still under the job's prefix).
 */
export function runInstanceId(runId: string): string {
  const slash = runId.indexOf('/');
  if (slash <= 0) throw new Error(`run id ${JSON.stringify(runId)} has no job part`);
  const job = runId.slice(0, slash);
  if (PLAIN.test(runId) && runId.length <= MAX_RUN_INSTANCE_ID) return `${job}${SEPARATOR}${runId.slice(slash + 1)}`;
  return `${job}${SEPARATOR}h${createHash('sha256').update(runId).digest('hex').slice(0, 32)}`;
}

/** The chunk sub-orchestration's id: fixed by the run and the chunk index, so a replay asks for the same one. */
export function chunkInstanceId(runInstance: string, chunk: number): string {
  return `${chunkInstancePrefix(runInstance)}${chunk}`;
}

/** Every chunk instance of the run instance starts with this. */
export function chunkInstancePrefix(runInstance: string): string {
  return `${runInstance}${SEPARATOR}chunk-`;
}

/** Every instance of a job (its runs and their chunks) starts with this. */
export function jobInstancePrefix(job: string): string {
  return `${job}${SEPARATOR}`;
}

export function isChunkInstance(instanceId: string): boolean {
  return CHUNK.test(instanceId);
}

/** The run id of a run instance, from its input when Durable returned it, else from the id itself. */
export function runIdOfInstance(instanceId: string, input?: unknown): string {
  const fromInput = (input as { runId?: unknown } | null | undefined)?.runId;
  if (typeof fromInput === 'string') return fromInput;
  const at = instanceId.indexOf(SEPARATOR);
  return at < 0 ? instanceId : `${instanceId.slice(0, at)}/${instanceId.slice(at + 1)}`;
}
