import type { QueuePort } from '../queue/queue-port';

/**
 * The message that wakes a resting hub: a tick on shard 0's work queue (every instance polls it)
 * that any instance takes, and that leads even while the lease rests (see `Leadership.restUntil`).
 * A leader already there makes it a no-op.
 */
export const WAKE_TICK = JSON.stringify({ v: 1, t: 'tick', epoch: 0, wake: true });

/**
 * Sends the wake after a request a leader must apply (a trigger): without it, a hub whose
 * leader rests until its next occurrence would start the run only then.
 */
export async function wakeHub(queue: QueuePort, options: { abortSignal?: AbortSignal } = {}): Promise<void> {
  await queue.send(WAKE_TICK, options.abortSignal ? { abortSignal: options.abortSignal } : {});
}
