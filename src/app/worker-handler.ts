import type { InvocationContext } from '@azure/functions';
import { handleWorkMessage, type WorkerDeps, type WorkOutcome } from '../engine/worker';
import { redactSecrets } from '../redact';
import { describeThrown } from '../errors';

/**
 * The queue trigger's handler. A failure before the last attempt is thrown so the host
 * redelivers the message (and, after maxDequeueCount, moves it to `<queue>-poison`).
 */
export function createWorkerHandler(deps: WorkerDeps) {
  return async (queueEntry: unknown, context: InvocationContext): Promise<WorkOutcome> => {
    const dequeueCount = Number(context.triggerMetadata?.dequeueCount ?? 1);
    let outcome: WorkOutcome;
    try {
      outcome = await handleWorkMessage(
        queueEntry,
        { dequeueCount: Number.isInteger(dequeueCount) && dequeueCount > 0 ? dequeueCount : 1 },
        deps,
      );
    } catch (err) {
      // A storage call failed (the host retries the message). SDK errors carry request details
      // (a SAS in a URL, headers); the host logs what is thrown, so it gets a clean one-liner.
      throw new Error(redactSecrets(describeThrown(err)));
    }
    if (outcome.kind === 'retry') {
      throw new Error(
        redactSecrets(
          `${outcome.failed > 0 ? `${outcome.failed} item(s) failed` : 'not handled'} on attempt ${dequeueCount} of ${deps.maxAttempts}; retrying: ${outcome.firstError}`,
        ),
      );
    }
    return outcome;
  };
}
