import { randomUUID } from 'node:crypto';
import { hostname } from 'node:os';
import { systemClock, type Clock } from '../clock/clock';
import { InvalidConfigError } from '../errors';
import { describeLeaderEvent, type LeaderEvent } from './leader-events';
import type { HandoverRequestStore } from './handover-request-store';
import type { LeaseStore } from './lease-store';
import type { LeaseBeats } from './lease-beats';
import { isVersion, type LeaderRank } from './leader-rank';
import { defaultHandoverTiming, type HandoverTiming } from './handover-timing';

export interface LeaderElectorOptions {
  /** Where the lease lives. */
  store: LeaseStore;
  /** Who this candidate is, written as the holder. Default `<host>:<pid>:<random>`. */
  identity?: string;
  /** Lease term, 15–60 s as Azure Storage allows. Default 15. */
  leaseDurationSeconds?: number;
  /** How often the leader renews. Default a third of the lease. */
  renewIntervalMs?: number;
  /**
   * How long after the start of its last successful renewal a leader keeps trying before it
   * gives up. Default two thirds of the lease; the rest is margin for clock rate and for the
   * task to stop before anyone else can acquire.
   */
  renewDeadlineMs?: number;
  /** How often `runWhenLeader` tries to acquire; each wait is jittered to 75–100 % of it. Default 2,000. */
  acquireRetryMs?: number;
  /** Stop renewing when the task has not called `heartbeat()` for this long. Default twice the lease. */
  stallTimeoutMs?: number;
  /**
   * How long after its term ends (loss, stall, the caller's abort) a task that has not settled
   * is still waited for. Then the elector abandons it, so this candidate can lead again. The
   * task may go on running; fencing keeps its writes out. Default 10,000.
   */
  abandonTaskAfterMs?: number;
  /**
   * Crash takeover: how long the holder's beats may stop before a candidate breaks its lease and
   * leads, instead of waiting out the lease. The holder beats (a `LeaseMark` `alive`, one write)
   * every quarter of it; a candidate that reads the same record `version` this far apart by its
   * own clock breaks the lease at that version only (`LeaseStore.breakIfUnchanged`), so a holder
   * that beat meanwhile, or a successor that already took over, is never broken. Whole
   * milliseconds, from 1,000 to less than the renew deadline. Default: off. With it on, a holder
   * that was only paused this long (a GC pause, SIGSTOP, an event loop blocked by a task) is
   * replaced while it may still act: only the epoch fence keeps its writes out, and it learns of
   * the loss at its next beat or renewal, whichever comes first.
   */
  breakAfterMs?: number;
  /**
   * With `breakAfterMs`: where the beats come from. Default: the holder's own event loop, so a
   * task that holds the loop for `breakAfterMs` (an item that computes on the leader's instance)
   * gets its holder replaced. `ThreadedLeaseBeats` beats a `BlobLeaseStore`'s lease from a worker
   * thread: then only a process that stops altogether (a crash, a kill, SIGSTOP) is taken over
   * early, and a busy one keeps the lease for as long as it renews it.
   */
  beats?: LeaseBeats;
  /**
   * When the other candidates try to acquire on a fixed grid of wall-clock instants (every
   * instance's coordinator timer fires at t ≡ offsetMs mod periodMs), the leader times each
   * renewal, up to half a renew interval early, so that its lease would expire `marginMs`
   * (default 300) before one of those instants. A crashed leader's successor then takes over on
   * the first tick after expiry instead of up to a whole period later. Renewing early never
   * shortens the lease, so safety is unchanged. It costs no extra requests when the period
   * divides the renew interval (a 1 s grid); otherwise renewals come a little more often (every
   * 4 s on a 2 s grid with a 15 s lease). On Azure Functions a timer trigger runs on one instance
   * at a time (the host holds a lock), so there are no followers ticking on the grid there: this
   * is for the local host and for electors whose candidates all tick.
   */
  expiryAlignment?: { periodMs: number; offsetMs?: number; marginMs?: number };
  /**
   * This candidate's rank (app version, then priority), recorded with its epoch when it leads so
   * that the others and the status can see which version leads. Default: none recorded.
   */
  rank?: LeaderRank;
  /**
   * With a `rank`: where candidates leave their handover requests beside the lease
   * (`BlobHandoverRequestStore` beside a `BlobLeaseStore`). Required with a rank.
   */
  requests?: HandoverRequestStore;
  /**
   * With a `rank`: how handovers are timed. A candidate that outranks the holder asks for the
   * lease and waits for it; the holder looks for requests every `checkMs` (default 2,000) and
   * hands over at its task's next safe point; a request stands for `requestTtlMs` (default
   * 3 × checkMs + 2,000), while its requester reads the lease every `pollMs` (default 100);
   * other candidates leave a reserved or higher-ranked lease alone for `deferMs` (default
   * 3 × acquireRetryMs). Without a rank none of this happens.
   */
  handover?: Partial<HandoverTiming>;
  clock?: Clock;
  /** Source of jitter, in [0, 1). Default `Math.random`. */
  random?: () => number;
  onEvent?: (event: LeaderEvent) => void;
  /** Where log lines go; `InvocationContext` and `console` both fit. */
  logger?: LeaderLogger;
}

export interface LeaderLogger {
  info(message: string): void;
  warn(message: string): void;
  debug?(message: string): void;
}

export interface ResolvedElectorOptions {
  store: LeaseStore;
  identity: string;
  leaseMs: number;
  leaseDurationSeconds: number;
  renewIntervalMs: number;
  renewDeadlineMs: number;
  acquireRetryMs: number;
  stallTimeoutMs: number;
  abandonTaskAfterMs: number;
  /** Crash takeover, when on: the silence that lets a candidate break, and the holder's beat. */
  takeover: { breakAfterMs: number; beatMs: number } | undefined;
  /** Set only with `takeover`. */
  beats: LeaseBeats | undefined;
  expiryAlignment: { periodMs: number; offsetMs: number; marginMs: number } | undefined;
  rank: LeaderRank | undefined;
  /** Set whenever `rank` is. */
  requests: HandoverRequestStore | undefined;
  handover: HandoverTiming;
  clock: Clock;
  random: () => number;
  onEvent: ((event: LeaderEvent) => void) | undefined;
  logger: LeaderLogger | undefined;
}

/** client-go's rule: the lease outlasts the renew deadline, which allows more than one renew try. */
export const RENEW_JITTER_FACTOR = 1.2;

// Exported so app settings that override them default, and check, exactly as the elector does.
export const defaultRenewIntervalMs = (leaseMs: number): number => Math.round(leaseMs / 3);
export const defaultRenewDeadlineMs = (leaseMs: number): number => Math.round((leaseMs * 2) / 3);

export function resolveElectorOptions(options: LeaderElectorOptions): ResolvedElectorOptions {
  if (!options || typeof options !== 'object') throw new InvalidConfigError('options', 'LeaderElector needs an options object');
  const { store } = options;
  if (!store || typeof store.acquire !== 'function') {
    throw new InvalidConfigError('store', 'store is required: a LeaseStore such as BlobLeaseStore or InMemoryLeaseStore');
  }
  const identity = options.identity ?? defaultIdentity();
  if (typeof identity !== 'string' || identity.trim() === '' || identity.length > 256) {
    throw new InvalidConfigError('identity', 'identity must be a non-empty string of at most 256 characters');
  }
  const leaseDurationSeconds = options.leaseDurationSeconds ?? 15;
  if (!Number.isInteger(leaseDurationSeconds) || leaseDurationSeconds < 15 || leaseDurationSeconds > 60) {
    throw new InvalidConfigError(
      'leaseDurationSeconds',
      `leaseDurationSeconds must be a whole number from 15 to 60 (Azure blob lease limits), got ${leaseDurationSeconds}`,
    );
  }
  const leaseMs = leaseDurationSeconds * 1000;
  const renewIntervalMs = options.renewIntervalMs ?? defaultRenewIntervalMs(leaseMs);
  positive('renewIntervalMs', renewIntervalMs);
  const renewDeadlineMs = options.renewDeadlineMs ?? defaultRenewDeadlineMs(leaseMs);
  positive('renewDeadlineMs', renewDeadlineMs);
  if (renewDeadlineMs >= leaseMs) {
    throw new InvalidConfigError(
      'renewDeadlineMs',
      `renewDeadlineMs (${renewDeadlineMs}) must be less than the lease (${leaseMs} ms)`,
    );
  }
  if (renewDeadlineMs <= RENEW_JITTER_FACTOR * renewIntervalMs) {
    throw new InvalidConfigError(
      'renewIntervalMs',
      `renewDeadlineMs (${renewDeadlineMs}) must be greater than ${RENEW_JITTER_FACTOR} × renewIntervalMs (${renewIntervalMs}), so a failed renew can be retried in time`,
    );
  }
  const acquireRetryMs = options.acquireRetryMs ?? 2000;
  positive('acquireRetryMs', acquireRetryMs);
  const stallTimeoutMs = options.stallTimeoutMs ?? 2 * leaseMs;
  positive('stallTimeoutMs', stallTimeoutMs);
  if (stallTimeoutMs < renewIntervalMs) {
    throw new InvalidConfigError(
      'stallTimeoutMs',
      `stallTimeoutMs (${stallTimeoutMs}) must be at least renewIntervalMs (${renewIntervalMs}); the watchdog checks on each renewal`,
    );
  }
  const abandonTaskAfterMs = options.abandonTaskAfterMs ?? 10_000;
  positive('abandonTaskAfterMs', abandonTaskAfterMs);
  let takeover: ResolvedElectorOptions['takeover'];
  if (options.breakAfterMs !== undefined) {
    const { breakAfterMs } = options;
    if (!Number.isInteger(breakAfterMs) || breakAfterMs < 1000 || breakAfterMs >= renewDeadlineMs) {
      throw new InvalidConfigError(
        'breakAfterMs',
        `breakAfterMs must be a whole number of milliseconds from 1000 to less than renewDeadlineMs (${renewDeadlineMs}), got ${String(breakAfterMs)}`,
      );
    }
    takeover = { breakAfterMs, beatMs: Math.round(breakAfterMs / 4) };
  }
  if (options.beats !== undefined) {
    if (!takeover)
      throw new InvalidConfigError('beats', 'beats needs breakAfterMs: without crash takeover the holder does not beat');
    if (typeof options.beats.start !== 'function') {
      throw new InvalidConfigError('beats', 'beats must be a LeaseBeats, such as ThreadedLeaseBeats');
    }
  }
  let expiryAlignment: ResolvedElectorOptions['expiryAlignment'];
  if (options.expiryAlignment) {
    const { periodMs, offsetMs = 0, marginMs = 300 } = options.expiryAlignment;
    positive('expiryAlignment.periodMs', periodMs);
    if (!Number.isFinite(offsetMs) || offsetMs < 0 || offsetMs >= periodMs) {
      throw new InvalidConfigError(
        'expiryAlignment.offsetMs',
        `expiryAlignment.offsetMs must be in [0, periodMs), got ${offsetMs}`,
      );
    }
    if (!Number.isFinite(marginMs) || marginMs < 0 || marginMs >= periodMs) {
      throw new InvalidConfigError(
        'expiryAlignment.marginMs',
        `expiryAlignment.marginMs must be in [0, periodMs), got ${marginMs}`,
      );
    }
    expiryAlignment = { periodMs, offsetMs, marginMs };
  }
  const { rank } = options;
  if (rank !== undefined) {
    if (typeof rank.version !== 'string' || !isVersion(rank.version)) {
      throw new InvalidConfigError(
        'rank.version',
        `rank.version must be a SemVer version such as 1.4.2, 2.0.0-rc.1 or 1.4.2+build.7, got ${String(rank.version)}`,
      );
    }
    if (!Number.isInteger(rank.priority) || rank.priority < 0 || rank.priority > 1000) {
      throw new InvalidConfigError(
        'rank.priority',
        `rank.priority must be a whole number from 0 to 1000, got ${String(rank.priority)}`,
      );
    }
    if (!options.requests || typeof options.requests.readRequest !== 'function') {
      throw new InvalidConfigError(
        'requests',
        'requests is required with a rank: a HandoverRequestStore beside the lease, such as BlobHandoverRequestStore',
      );
    }
  }
  const handover = { ...defaultHandoverTiming(acquireRetryMs), ...options.handover };
  if (options.handover?.checkMs !== undefined && options.handover.requestTtlMs === undefined) {
    handover.requestTtlMs = 3 * handover.checkMs + 2000;
  }
  for (const key of ['checkMs', 'requestTtlMs', 'pollMs', 'deferMs'] as const) positive(`handover.${key}`, handover[key]);
  if (handover.requestTtlMs <= handover.checkMs) {
    throw new InvalidConfigError(
      'handover.requestTtlMs',
      `handover.requestTtlMs (${handover.requestTtlMs}) must be longer than handover.checkMs (${handover.checkMs}), or the holder may never see a request`,
    );
  }
  return {
    store,
    identity,
    leaseMs,
    leaseDurationSeconds,
    renewIntervalMs,
    renewDeadlineMs,
    acquireRetryMs,
    stallTimeoutMs,
    abandonTaskAfterMs,
    takeover,
    beats: takeover ? options.beats : undefined,
    expiryAlignment,
    rank: rank ? { ...rank } : undefined,
    requests: rank ? options.requests : undefined,
    handover,
    clock: options.clock ?? systemClock,
    random: options.random ?? Math.random,
    onEvent: options.onEvent,
    logger: options.logger,
  };
}

function positive(option: string, value: number): void {
  if (typeof value !== 'number' || !Number.isFinite(value) || value <= 0) {
    throw new InvalidConfigError(option, `${option} must be a positive number of milliseconds, got ${String(value)}`);
  }
}

function defaultIdentity(): string {
  // On Azure, WEBSITE_INSTANCE_ID tells instances apart better than a container host name.
  const instance = process.env.WEBSITE_INSTANCE_ID?.slice(0, 12);
  return `${instance ?? hostname()}:${process.pid}:${randomUUID().slice(0, 8)}`;
}

/** Reports `event` to the options' listener and logger; neither can break the lease loop by throwing. */
export function emitEvent(options: ResolvedElectorOptions, event: LeaderEvent): void {
  try {
    options.onEvent?.(event);
  } catch {
    // A throwing listener must not break the lease loop.
  }
  const logger = options.logger;
  if (!logger) return;
  try {
    const { level, message } = describeLeaderEvent(event);
    if (level === 'debug') logger.debug?.(message);
    else logger[level](message);
  } catch {
    // Nor a throwing logger.
  }
}
