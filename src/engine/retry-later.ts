import { ConcurrentUpdateError, describeThrown, LeaseLostError, StaleEpochError } from '../errors';
import { redactSecrets } from '../redact';
import type { EngineContext, TermContext } from './engine-context';

/**
 * The leader's rule for an error in one piece of its work: an error that means the term is
 * over (its signal aborted, a newer epoch, the lease lost) is rethrown; anything else is logged
 * as `what: error`, and the piece is tried again later. A record someone else changed is
 * expected after a takeover, so it is logged at info.
 */
export function retryLater(ctx: EngineContext, term: TermContext, what: string, err: unknown): void {
  if (term.signal.aborted || err instanceof StaleEpochError || err instanceof LeaseLostError) throw err;
  // SDK errors can carry request details, a SAS included.
  const line = `${what}: ${redactSecrets(describeThrown(err))}`;
  if (err instanceof ConcurrentUpdateError) ctx.log.info(line);
  else ctx.log.warn(line);
}
