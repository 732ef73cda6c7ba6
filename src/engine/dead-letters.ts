import { ConcurrentUpdateError } from '../errors';
import type { ReceivedMessage } from '../queue/queue-port';
import { redactSecrets } from '../redact';
import type { EngineContext, TermContext } from './engine-context';
import { truncate } from './messages';

export const DEAD_LETTER_PREFIX = 'dead-letters/';

export interface DeadLetter {
  queue: string;
  messageId: string;
  reason: string;
  run: string | null;
  at: string;
  body: string;
}

/**
 * Keeps a message the leader is about to delete without counting it (a worker's poison note, a
 * malformed result): one blob per message under `dead-letters/<day>/`, so the reason survives
 * the queue. Written once per message id; a retry after a crash finds it there.
 */
export async function keepDeadLetter(
  ctx: EngineContext,
  term: TermContext,
  queue: string,
  message: ReceivedMessage,
  reason: string,
  run?: string,
  /** The original body, when the message wraps it (a worker's poison note). */
  body: string = message.text,
): Promise<void> {
  const at = ctx.clock.date();
  const letter: DeadLetter = {
    queue,
    messageId: message.id,
    reason,
    run: run ?? null,
    at: at.toISOString(),
    body: truncate(redactSecrets(body)),
  };
  const key = `${DEAD_LETTER_PREFIX}${at.toISOString().slice(0, 10)}/${message.id}.json`;
  try {
    await ctx.docs.write(key, JSON.stringify(letter), { ifNoneMatch: '*' }, { abortSignal: term.signal });
  } catch (err) {
    if (!(err instanceof ConcurrentUpdateError)) throw err;
  }
}
