import { StaleEpochError } from '../errors';
import { raiseAbove } from '../lease/epoch-refusal';
import type { EngineContext, TermContext } from './engine-context';

/**
 * The leader's answer to a write refused by a newer stored epoch.
 *
 * A refusal means one of two things. Either this term is stale (someone else holds the lease
 * with a newer epoch), or the lease record restarted its count (its blob or its container was
 * deleted, and the next holder bumped 0 to 1) and the hub's documents still carry the epochs of
 * the terms before. Only the lease tells them apart, so the term asks it: the raise is a write
 * to the lease record under this term's lease. A stale term's raise is refused (its lease id no
 * longer holds) and the refusal stands, ending the term as before; a current holder's raise
 * lands above the stored epoch, so every later holder bumps above it too, and the term goes on.
 *
 * Returns `undefined` when the term may retry the piece under its new epoch (`term.epoch` is
 * updated here, between pieces of work, so one piece never writes under two epochs), and
 * otherwise the error for the caller to handle as any other: the refusal itself when the term
 * has lost its lease, or the raise's own failure (a timeout, a 5xx), retried later.
 */
export async function raiseAboveRefusal(ctx: EngineContext, term: TermContext, err: unknown): Promise<unknown> {
  if (!(err instanceof StaleEpochError)) return err;
  // Refused under an epoch an earlier raise of this term has already left behind: just retry.
  if (term.epoch > err.storedEpoch) return undefined;
  const from = term.epoch;
  try {
    term.epoch = await raiseAbove(term.leadership, err);
  } catch (failure) {
    return failure;
  }
  ctx.log.warn(
    `epoch ${from} was refused by stored epoch ${err.storedEpoch} at ${err.key}; raised this term's epoch to ${term.epoch} ` +
      'under its lease (the lease record had restarted its count) and fencing the open runs again',
  );
  return undefined;
}

/**
 * Runs the term's takeover until one pass completes at the term's epoch, and returns that
 * epoch. A pass can raise the epoch (a refused write, above); the runs it fenced before the
 * raise carry the older epoch, which a stale leader from before the lease record restarted may
 * still exceed, so they are fenced again under the new one.
 */
export async function fenceAtTermEpoch(term: TermContext, takeOver: () => Promise<void>): Promise<number> {
  for (;;) {
    const epoch = term.epoch;
    await takeOver();
    if (term.epoch === epoch) return epoch;
  }
}
