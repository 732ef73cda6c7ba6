/** How often the two sides of a handover look, and how long they wait (see `Handover`). */
export interface HandoverTiming {
  /** How often the holder looks for a request. */
  checkMs: number;
  /** How long a request stands after it is written; the requester waits for it that long. */
  requestTtlMs: number;
  /** How often a requester reads the lease while its request stands. */
  pollMs: number;
  /** How long a candidate leaves a free lease to a higher-ranked last holder or the reserved candidate. */
  deferMs: number;
}

/** After the wall-clock grid instant the others tick on, the holder looks this much later. */
export const CHECK_LAG_MS = 250;
/**
 * How often a requester reads the lease once its holder is leaving (at most; `pollMs` when
 * shorter): its wait after the release is the leaderless gap. It polls this fast only while a
 * holder that said it is leaving still holds the lease: until the holder releases, a few seconds,
 * or until its lease expires if it died meanwhile (300 reads at most on a 15 s lease).
 */
export const LEAVING_POLL_MS = 50;

export function defaultHandoverTiming(acquireRetryMs: number): HandoverTiming {
  const checkMs = 2000;
  return { checkMs, requestTtlMs: 3 * checkMs + 2000, pollMs: 100, deferMs: 3 * acquireRetryMs };
}

/**
 * The wait before the next check: `checkMs` on average. On a grid, the check lands `CHECK_LAG_MS`
 * after one of its instants, when requesters have just written (they ask on their ticks).
 */
export function nextCheckDelay(
  wallNow: number,
  checkMs: number,
  grid: { periodMs: number; offsetMs: number } | undefined,
): number {
  if (!grid || checkMs < grid.periodMs) return checkMs;
  const earliest = wallNow + checkMs - grid.periodMs / 2;
  const phase = (grid.offsetMs + CHECK_LAG_MS) % grid.periodMs;
  const into = (((earliest - phase) % grid.periodMs) + grid.periodMs) % grid.periodMs;
  const at = into === 0 ? earliest : earliest + grid.periodMs - into;
  return at - wallNow;
}
