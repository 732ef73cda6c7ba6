import { SeededRandom } from './rng';

export const FAULT_KINDS = [
  'kill',
  'bare-sigterm',
  'drain-abort',
  'pause',
  'storage-restart',
  'proxy',
  'lease-break',
  'unreadable-record',
  'worker-death',
  'hung-hook',
  'lease-delete',
  'keyed-trigger',
  'rolling-deploy',
  'frozen-timer',
  'straggler',
] as const;
export type FaultKind = (typeof FAULT_KINDS)[number];

/**
 * Kinds a plan injects once rather than once per round: the deploy kinds replace every instance
 * and take a minute or so, and a straggler stays paused half a minute; a round of them would
 * leave a 10-minute soak too few rounds of the others (three, so every hook gets hung).
 */
export const ONCE_PER_PLAN: readonly FaultKind[] = ['rolling-deploy', 'frozen-timer', 'straggler'];

/** The job hooks a `hung-hook` fault can hang. */
export const HUNG_HOOKS = ['split', 'process', 'finalize'] as const;
export type HungHook = (typeof HUNG_HOOKS)[number];

/** Which instance a `bare-sigterm` fault stops: the lease holder, or one that does not hold it. */
export const SIGTERM_TARGETS = ['leader', 'other'] as const;
export type SigtermTarget = (typeof SIGTERM_TARGETS)[number];

/** What a `lease-delete` fault deletes: the lease blob (its lease broken first) or its whole container. */
export const LEASE_DELETE_TARGETS = ['blob', 'container'] as const;
export type LeaseDeleteTarget = (typeof LEASE_DELETE_TARGETS)[number];

/** Shares of requests the fault proxy disturbs while a proxy fault is on (the rest pass untouched). */
export interface ProxyProfile {
  /** Held back before being forwarded, for `latencyMs`. */
  latency: number;
  latencyMs: readonly [number, number];
  /** Answered 503 ServerBusy without reaching storage. */
  unavailable: number;
  /** Connection reset before the request reaches storage. */
  resetBefore: number;
  /** Forwarded and applied by storage, then the connection is reset: the client never hears. */
  resetAfter: number;
}

export type FaultStep =
  /** kill -9 of a random instance; a replacement starts `restartAfterMs` later. */
  | { kind: 'kill'; atMs: number; restartAfterMs: number }
  /**
   * A bare SIGTERM, no hook, as the platform sends when it deletes a container (Flex scale-in):
   * to the leader while a run is open, or to an instance that does not lead; the host's kill
   * follows 5 s later. A replacement starts `restartAfterMs` after the signal.
   */
  | { kind: 'bare-sigterm'; atMs: number; target: SigtermTarget; restartAfterMs: number }
  /**
   * Drain mode for the instance that has just taken up a long work message: the host aborts it 1
   * to 3 s in, so its message comes back while its code runs on, then a bare SIGTERM once the
   * instance has drained. A replacement starts `restartAfterMs` after the drain.
   */
  | { kind: 'drain-abort'; atMs: number; restartAfterMs: number }
  /** SIGSTOP of the leader for `pauseMs` (longer than the lease), then SIGCONT. */
  | { kind: 'pause'; atMs: number; pauseMs: number }
  /** Storage stops (connections refused) and comes back from its folder `downMs` later. */
  | { kind: 'storage-restart'; atMs: number; downMs: number }
  | { kind: 'proxy'; atMs: number; windowMs: number; profile: ProxyProfile }
  /** An outside client breaks the leader's lease. */
  | { kind: 'lease-break'; atMs: number }
  /**
   * For `windowMs`, storage answers every request for one open run's record with 500
   * InternalError, as when the partition serving that one blob is unavailable; other blobs are
   * served as usual.
   */
  | { kind: 'unreadable-record'; atMs: number; windowMs: number }
  /**
   * The first instance whose worker sends an item's final failure (its last try) within
   * `withinMs` SIGKILLs itself before the message is deleted, so the message is delivered again
   * and a second result for the same items reaches the leader after the first; a replacement
   * starts `restartAfterMs` later.
   */
  | { kind: 'worker-death'; atMs: number; withinMs: number; restartAfterMs: number }
  /** One hook of one run of a test job never settles and ignores its abort signal. */
  | { kind: 'hung-hook'; atMs: number; hook: HungHook }
  /** An outside client deletes the lease blob, or the container holding it, under a leader. */
  | { kind: 'lease-delete'; atMs: number; target: LeaseDeleteTarget }
  /**
   * `clients` separate clients at once, then each once more (a retry after a timeout), trigger
   * the same job with the same idempotency key: every answer must name one run, started once.
   */
  | { kind: 'keyed-trigger'; atMs: number; clients: number }
  /** Every instance replaced, one at a time, by one of the next app version (start new, then the old one's WorkerTerminate). */
  | { kind: 'rolling-deploy'; atMs: number }
  /** Every instance replaced by one whose timers are off; after `windowMs`, replaced back. */
  | { kind: 'frozen-timer'; atMs: number; windowMs: number }
  /**
   * One more instance starts, and is stopped (SIGSTOP) while its worker holds work messages of an
   * open run, for `pauseMs`, far past the run's hedge wait; then SIGCONT. Its messages stay hidden
   * all the while, so only a copy of them can end the run before it comes back.
   */
  | { kind: 'straggler'; atMs: number; pauseMs: number };

export interface FaultPlanOptions {
  seed: number;
  /** Faults start and end within this time. */
  durationMs: number;
  kinds?: readonly FaultKind[];
  leaseSeconds: number;
  /**
   * Least quiet time between two faults, on average. Default 6 s, so runs make progress between
   * faults and a 10-minute plan still has three rounds of every kind.
   */
  minGapMs?: number;
}

/**
 * The least quiet time between two faults, on average, unless a plan says otherwise. Twelve kinds
 * a round, each with its gap, fit three rounds and the once-per-plan kinds into 10 minutes at 6 s
 * (at 8 s only two: a hook of the three would go unhung).
 */
export const DEFAULT_MIN_GAP_MS = 6000;

const PROXY_PROFILE: ProxyProfile = {
  latency: 0.2,
  latencyMs: [100, 1500],
  unavailable: 0.05,
  resetBefore: 0.03,
  resetAfter: 0.02,
};

/** Mean time each kind keeps the cluster disturbed, used to fit rounds into the duration. */
function meanBusyMs(kind: FaultKind, leaseSeconds: number): number {
  switch (kind) {
    case 'kill':
      return 2000;
    // The stop, which Baton ends within the host's 5 s; the replacement starts meanwhile.
    case 'bare-sigterm':
      return 4000;
    // The abort 1 to 3 s in, the drain's end, then the stop. Waiting for an instance to take up
    // a long message is not counted, as a pause's wait for an open run is not.
    case 'drain-abort':
      return 6000;
    case 'pause':
      return leaseSeconds * 1000 + 4000;
    case 'storage-restart':
      return 1750;
    case 'proxy':
      return 9000;
    case 'lease-break':
    case 'lease-delete':
    case 'keyed-trigger':
      return 0;
    case 'unreadable-record':
      return 25_000;
    // Mostly waiting for a failing item's last try.
    case 'worker-death':
      return 12_000;
    // The hang bites when the run gets there; the soak does not wait for it.
    case 'hung-hook':
      return 0;
    // Each instance: its replacement's start, then the old one's stop (the host kills it 5 s on).
    case 'rolling-deploy':
      return 15_000;
    case 'frozen-timer':
      return 52_500 + 2 * 15_000;
    // The pause, and its instance's start and stop. Waiting for a run to catch it in is not
    // counted, as a pause's wait for an open run is not.
    case 'straggler':
      return 30_000;
  }
}

/**
 * A seeded fault schedule: rounds in which every kind occurs once, in shuffled order, with the
 * quiet time shared out between them. As many whole rounds as fit, at least one, so every kind
 * is injected; the kinds of `ONCE_PER_PLAN` go in once each, at random places. The same seed and
 * options give the same plan.
 */
export function planFaults(options: FaultPlanOptions): FaultStep[] {
  const kinds = options.kinds ?? FAULT_KINDS;
  if (kinds.length === 0) throw new RangeError('planFaults needs at least one fault kind');
  const rng = new SeededRandom(options.seed);
  const minGapMs = options.minGapMs ?? DEFAULT_MIN_GAP_MS;
  const once = kinds.filter((kind) => ONCE_PER_PLAN.includes(kind));
  const each = kinds.filter((kind) => !ONCE_PER_PLAN.includes(kind));
  const busyOf = (list: readonly FaultKind[]) =>
    list.reduce((sum, kind) => sum + meanBusyMs(kind, options.leaseSeconds) + minGapMs, 0);
  const roundMs = busyOf(each);
  const rounds = each.length === 0 ? 0 : Math.max(1, Math.floor((options.durationMs - busyOf(once)) / roundMs));
  const order = Array.from({ length: rounds }, () => rng.shuffle(each)).flat();
  // Drawn after the rounds, so a plan without these kinds stays the same for its seed.
  for (const kind of once) order.splice(rng.int(0, order.length), 0, kind);

  // Variants go round in a shuffled cycle, so a plan with enough rounds has each; they are drawn
  // only when their kind is in the plan, so a plan without it stays the same for its seed.
  const variants = <T>(all: readonly T[]): (() => T) => {
    let cycle: T[] | undefined;
    let next = 0;
    return () => {
      cycle ??= rng.shuffle(all);
      return cycle[next++ % cycle.length] as T;
    };
  };
  const choose = {
    hook: variants(HUNG_HOOKS),
    leaseTarget: variants(LEASE_DELETE_TARGETS),
    sigtermTarget: variants(SIGTERM_TARGETS),
  };
  const steps = order.map((kind) => makeStep(kind, 0, rng, options.leaseSeconds, choose));
  const busy = steps.reduce((sum, step) => sum + stepDurationMs(step), 0);
  const quiet = Math.max(steps.length * minGapMs, options.durationMs - busy);
  // Gaps vary by ±25% around their share, so faults do not fall on one phase of the tick; the
  // shares are scaled to add up, so the last fault ends when the duration does.
  const weights = steps.map(() => 0.75 + rng.next() * 0.5);
  const total = weights.reduce((a, b) => a + b, 0);
  let at = 0;
  for (const [index, step] of steps.entries()) {
    at += Math.floor((quiet * (weights[index] as number)) / total);
    step.atMs = at;
    at += stepDurationMs(step);
  }
  return steps;
}

function makeStep(
  kind: FaultKind,
  atMs: number,
  rng: SeededRandom,
  leaseSeconds: number,
  choose: { hook: () => HungHook; leaseTarget: () => LeaseDeleteTarget; sigtermTarget: () => SigtermTarget },
): FaultStep {
  switch (kind) {
    case 'kill':
      return { kind, atMs, restartAfterMs: rng.int(1000, 3000) };
    case 'bare-sigterm':
      return { kind, atMs, target: choose.sigtermTarget(), restartAfterMs: rng.int(1000, 3000) };
    case 'drain-abort':
      return { kind, atMs, restartAfterMs: rng.int(1000, 3000) };
    case 'pause':
      return { kind, atMs, pauseMs: leaseSeconds * 1000 + rng.int(2000, 6000) };
    case 'storage-restart':
      return { kind, atMs, downMs: rng.int(500, 3000) };
    case 'proxy':
      return { kind, atMs, windowMs: rng.int(6000, 12000), profile: PROXY_PROFILE };
    case 'lease-break':
      return { kind, atMs };
    case 'unreadable-record':
      // Longer than the SDK's retries of one call (4 tries over 16 s), so calls fail, not just wait.
      return { kind, atMs, windowMs: rng.int(20_000, 30_000) };
    case 'worker-death':
      return { kind, atMs, withinMs: 60_000, restartAfterMs: rng.int(1000, 3000) };
    case 'hung-hook':
      return { kind, atMs, hook: choose.hook() };
    case 'lease-delete':
      return { kind, atMs, target: choose.leaseTarget() };
    case 'keyed-trigger':
      return { kind, atMs, clients: rng.int(4, 12) };
    case 'rolling-deploy':
      return { kind, atMs };
    case 'frozen-timer':
      // Longer than a period of the soak's schedules (20 s) and 30 s, so the window can show a gap.
      return { kind, atMs, windowMs: rng.int(45_000, 60_000) };
    case 'straggler':
      // Five times the soak jobs' hedge wait (5 s) and more, and longer than a clean run of the
      // job it hits takes twice (about 6 s each): a run that waits for the straggler's return
      // ends well past the bound on its makespan.
      return { kind, atMs, pauseMs: rng.int(25_000, 30_000) };
  }
}

/** How long a step keeps its fault on. */
export function stepDurationMs(step: FaultStep): number {
  switch (step.kind) {
    case 'kill':
    case 'bare-sigterm':
      return step.restartAfterMs;
    case 'pause':
      return step.pauseMs;
    case 'storage-restart':
      return step.downMs;
    case 'proxy':
      return step.windowMs;
    case 'unreadable-record':
      return step.windowMs;
    case 'frozen-timer':
      return step.windowMs;
    case 'straggler':
      return step.pauseMs;
    // These last as long as their target takes: the soak waits for it, not the plan.
    case 'worker-death':
    case 'drain-abort':
    case 'hung-hook':
    case 'lease-break':
    case 'lease-delete':
    case 'keyed-trigger':
    case 'rolling-deploy':
      return 0;
  }
}
