/**
 * The function names the durable engine registers. Orchestrations refer to each other and to
 * their activities by these names, and Durable records them in every history: renaming one
 * breaks every run in flight, so they are constants.
 */
export const DURABLE_NAMES = {
  /** The run orchestrator: split, fan out over chunks, fold, finalize. */
  orchestrator: 'baton-run',
  /** One chunk of at most `chunkItems` items, a sub-orchestration of the run. */
  chunk: 'baton-chunk',
  /** Activity: persists the plan and the run record. */
  split: 'baton-split',
  /** Activity: processes one work message's worth of items read from the plan. */
  process: 'baton-process',
  /** Activity: output, failures manifest, the finalize hook, the run record's end. */
  finalize: 'baton-finalize',
  /** The leader's timer function that starts due runs (registered by the app). */
  starter: 'baton-starter',
} as const;

/**
 * The fencing epoch of the run records the durable activities write. Activities do not lead,
 * so they have no epoch of their own; 0 is below every leader's (a leader's first term is 1). A record
 * a queue-engine leader has written is therefore refused to durable writers (`StaleEpochError`)
 * rather than overwritten, and nothing an activity writes can fence out a leader. (The durable
 * starter runs under the lease and writes job state with the leader's own epoch.)
 *
 * One engine per hub: the durable starter lists open durable runs in `jobs/<job>.json` so that
 * `baton status` shows them, and a queue-engine leader adopts every run listed there.
 */
export const DURABLE_EPOCH = 0;
