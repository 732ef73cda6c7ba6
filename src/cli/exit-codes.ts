/**
 * The CLI's exit codes. A script can tell them apart: 2 means the command line is wrong (fix it
 * and run again), 3 means storage did not answer (retry later), 1 is anything else that failed.
 */
export const EXIT = {
  /** Done. */
  ok: 0,
  /** Failed: a refusal, an unknown run, a bad setting in the environment or local.settings.json. */
  failed: 1,
  /** Usage: an unknown command or option, a missing argument, or a bad option value. */
  usage: 2,
  /** Storage could not be reached (refused, unresolved, or no answer within `--timeout`). */
  unreachable: 3,
} as const;
