import type { LeaseLossReason } from '../errors';
import type { LeaseHolderBefore } from './lease-store';

/** What the elector reports through `onEvent`; each also becomes one log line. */
export type LeaderEvent =
  /** `after`: the holder before, and how its lease became free (`expired`: it stopped without giving it back). */
  | { type: 'acquired'; identity: string; epoch: number; leaseId: string; after?: LeaseHolderBefore }
  | { type: 'renewed'; identity: string; epoch: number; latencyMs: number }
  | { type: 'renew-failed'; identity: string; epoch: number; error: unknown; sinceLastRenewMs: number }
  | { type: 'lost'; identity: string; epoch: number; reason: LeaseLossReason; sinceLastRenewMs: number; error?: unknown }
  /** `to`: the candidate the lease was handed over to (named in the lease before the release). */
  /** `restingUntil`: the holder said in the lease that nothing needs a leader before then (`Leadership.restUntil`). */
  | { type: 'released'; identity: string; epoch: number; ledMs: number; to?: string; restingUntil?: Date }
  | { type: 'release-failed'; identity: string; epoch: number; error: unknown }
  /** The holder raised its epoch from `from` to `epoch`, above a stored document's `above`. */
  | { type: 'epoch-raised'; identity: string; epoch: number; from: number; above: number }
  | { type: 'acquire-failed'; identity: string; error: unknown }
  /** This candidate outranks the holder and asked it to hand over. */
  | { type: 'handover-asked'; identity: string; holder: string; epoch: number }
  /**
   * The holder is leaving (`handOver`): it said so in the lease and waits up to `waitMs` for a
   * candidate to ask, leading meanwhile.
   */
  | { type: 'leaving'; identity: string; epoch: number; waitMs: number }
  /** The holder saw a request from a higher-ranked candidate (any, once leaving) and yields at its task's next safe point. */
  | { type: 'handover-requested'; identity: string; epoch: number; requester: string }
  /** This candidate leaves a free lease to `to` for up to `forMs`: reserved for it, or its last, higher-ranked holder. */
  | { type: 'deferred'; identity: string; to: string; reserved: boolean; forMs: number }
  /**
   * This candidate broke the lease of `holder` (at `epoch`), whose record had not changed for
   * `silentMs`: its beats had stopped (`breakAfterMs`). It tries to acquire next.
   */
  | { type: 'broke'; identity: string; holder: string | undefined; epoch: number; silentMs: number }
  /** The term ended but its task ignored its signal: the elector stopped waiting for it. */
  | { type: 'task-abandoned'; identity: string; epoch: number; waitedMs: number };

export function describeLeaderEvent(event: LeaderEvent): { level: 'info' | 'warn' | 'debug'; message: string } {
  const who = `holder=${event.identity}`;
  switch (event.type) {
    case 'acquired':
      return {
        level: 'info',
        message: `leadership acquired: ${who} epoch=${event.epoch}${event.after ? ` after=${event.after.holder} freedAs=${event.after.freedAs ?? 'unknown'}` : ''}`,
      };
    case 'renewed':
      return { level: 'debug', message: `lease renewed: ${who} epoch=${event.epoch} latencyMs=${Math.round(event.latencyMs)}` };
    case 'renew-failed':
      return {
        level: 'warn',
        message: `lease renew failed, retrying: ${who} epoch=${event.epoch} lastRenewAgoMs=${Math.round(event.sinceLastRenewMs)} error=${errorKind(event.error)}`,
      };
    case 'lost':
      return {
        level: 'warn',
        message: `leadership lost: ${who} epoch=${event.epoch} reason=${event.reason} lastRenewAgoMs=${Math.round(event.sinceLastRenewMs)}`,
      };
    case 'released':
      return {
        level: 'info',
        message: `lease released: ${who} epoch=${event.epoch} ledMs=${Math.round(event.ledMs)}${event.to ? ` handedOverTo=${event.to}` : ''}${event.restingUntil ? ` restingUntil=${event.restingUntil.toISOString()}` : ''}`,
      };
    case 'handover-asked':
      return { level: 'info', message: `handover asked: ${who} of holder=${event.holder} epoch=${event.epoch}` };
    case 'leaving':
      return {
        level: 'info',
        message: `leaving: ${who} epoch=${event.epoch}; leading until a successor asks, for up to ${Math.round(event.waitMs)} ms`,
      };
    case 'handover-requested':
      return {
        level: 'info',
        message: `handover requested: ${who} epoch=${event.epoch} requester=${event.requester}; yielding at the next safe point`,
      };
    case 'deferred':
      return {
        level: 'debug',
        message: `leaving the free lease to ${event.to} (${event.reserved ? 'reserved for it' : 'its last holder ranks higher'}) for up to ${Math.round(event.forMs)} ms: ${who}`,
      };
    case 'release-failed':
      return {
        level: 'warn',
        message: `lease release failed (it will expire): ${who} epoch=${event.epoch} error=${errorKind(event.error)}`,
      };
    case 'epoch-raised':
      // Warn: it means the lease record restarted its count (its blob or container was deleted).
      return {
        level: 'warn',
        message: `epoch raised above a stored epoch: ${who} epoch=${event.from}->${event.epoch} storedEpoch=${event.above}`,
      };
    case 'acquire-failed':
      return { level: 'warn', message: `lease acquire failed: ${who} error=${errorKind(event.error)}` };
    case 'broke':
      return {
        level: 'warn',
        message: `broke the lease of a holder whose beats stopped: ${who} holder=${event.holder ?? 'unknown'} epoch=${event.epoch} silentMs=${Math.round(event.silentMs)}`,
      };
    case 'task-abandoned':
      return {
        level: 'warn',
        message: `leader task ignored the end of its term, abandoned: ${who} epoch=${event.epoch} waitedMs=${Math.round(event.waitedMs)}`,
      };
  }
}

function errorKind(error: unknown): string {
  if (error instanceof Error) {
    const code = (error as { code?: unknown }).code;
    const status = (error as { statusCode?: unknown }).statusCode;
    // Only name, status and code: SDK messages can echo request URLs with SAS tokens.
    return [error.name, status, typeof code === 'string' ? code : undefined].filter((x) => x !== undefined).join(' ');
  }
  return typeof error;
}
