import { SeededRandom } from './rng';

export const FAULT_KINDS = ['kill', 'pause', 'storage-restart', 'proxy', 'lease-break'] as const;
export type FaultKind = (typeof FAULT_KINDS)[number];

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
  /** SIGSTOP of the leader for `pauseMs` (longer than the lease), then SIGCONT. */
  | { kind: 'pause'; atMs: number; pauseMs: number }
  /** Storage stops (connections refused) and comes back from its folder `downMs` later. */
  | { kind: 'storage-restart'; atMs: number; downMs: number }
  | { kind: 'proxy'; atMs: number; windowMs: number; profile: ProxyProfile }
  /** An outside client breaks the leader's lease. */
  | { kind: 'lease-break'; atMs: number };

export interface FaultPlanOptions {
  seed: number;
  /** Faults start and end within this time. */
  durationMs: number;
  kinds?: readonly FaultKind[];
  leaseSeconds: number;
  /** Least quiet time between two faults. Default 8 s, so runs make progress between faults. */
  minGapMs?: number;
}

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
    case 'pause':
      return leaseSeconds * 1000 + 4000;
    case 'storage-restart':
      return 1750;
    case 'proxy':
      return 9000;
    case 'lease-break':
      return 0;
  }
}

/**
 * A seeded fault schedule: rounds in which every kind occurs once, in shuffled order, with the
 * quiet time shared out between them. As many whole rounds as fit, at least one, so every kind
 * is injected; the same seed and options give the same plan.
 */
export function planFaults(options: FaultPlanOptions): FaultStep[] {
  const kinds = options.kinds ?? FAULT_KINDS;
  if (kinds.length === 0) throw new RangeError('planFaults needs at least one fault kind');
  const rng = new SeededRandom(options.seed);
  const minGapMs = options.minGapMs ?? 8000;
  const roundMs = kinds.reduce((sum, kind) => sum + meanBusyMs(kind, options.leaseSeconds) + minGapMs, 0);
  const rounds = Math.max(1, Math.floor(options.durationMs / roundMs));
  const order = Array.from({ length: rounds }, () => rng.shuffle(kinds)).flat();

  const steps = order.map((kind) => makeStep(kind, 0, rng, options.leaseSeconds));
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

function makeStep(kind: FaultKind, atMs: number, rng: SeededRandom, leaseSeconds: number): FaultStep {
  switch (kind) {
    case 'kill':
      return { kind, atMs, restartAfterMs: rng.int(1000, 3000) };
    case 'pause':
      return { kind, atMs, pauseMs: leaseSeconds * 1000 + rng.int(2000, 6000) };
    case 'storage-restart':
      return { kind, atMs, downMs: rng.int(500, 3000) };
    case 'proxy':
      return { kind, atMs, windowMs: rng.int(6000, 12000), profile: PROXY_PROFILE };
    case 'lease-break':
      return { kind, atMs };
  }
}

/** How long a step keeps its fault on. */
export function stepDurationMs(step: FaultStep): number {
  switch (step.kind) {
    case 'kill':
      return step.restartAfterMs;
    case 'pause':
      return step.pauseMs;
    case 'storage-restart':
      return step.downMs;
    case 'proxy':
      return step.windowMs;
    case 'lease-break':
      return 0;
  }
}
