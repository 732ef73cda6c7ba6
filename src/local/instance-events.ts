import * as z from '../zod';

/** What an instance process tells the cluster, one JSON object per stdout line. */
export const instanceEventSchema = z.discriminatedUnion('kind', [
  z.object({ kind: z.literal('started'), pid: z.number() }),
  z.object({
    kind: z.literal('leader'),
    type: z.string(),
    epoch: z.optional(z.number()),
    reason: z.optional(z.string()),
    latencyMs: z.optional(z.number()),
    /** On `released`: the candidate the lease was handed over to, when one asked. */
    to: z.optional(z.string()),
  }),
  z.object({ kind: z.literal('worked'), items: z.number() }),
  /**
   * A work message this instance's worker took up (`held`), or let go (`held: false`: its handler
   * returned, its result sent, or threw). Only with `BATON_CHAOS_REPORT_WORK=1`: the chaos soak's
   * straggler fault stops an instance while it holds one, and these say which.
   */
  z.object({ kind: z.literal('work'), run: z.string(), first: z.number(), count: z.number(), held: z.boolean() }),
  /** The loopback port on which it serves the app's http functions (the cluster's front door forwards there). */
  z.object({ kind: z.literal('http'), port: z.number() }),
  /**
   * How many tick messages its handlers hold now, sent when that changes. A tick that wakes a
   * term stays hidden for the whole term, beside the beacon; the chaos soak's drain tells those
   * apart from work still in a worker's hands by this count.
   */
  z.object({ kind: z.literal('ticks'), held: z.number() }),
  z.object({ kind: z.literal('log'), level: z.enum(['info', 'warn']), message: z.string() }),
  z.object({
    kind: z.literal('requests'),
    total: z.number(),
    byOperation: z.record(z.string(), z.number()),
    /** Request body bytes sent so far, in all and by operation (operations that sent none left out). */
    bytes: z.optional(z.number()),
    bytesByOperation: z.optional(z.record(z.string(), z.number())),
  }),
  /** Invocations the local host ran so far and their summed time, by kind (see `LocalHost.invocationTime`). */
  z.object({
    kind: z.literal('invocations'),
    coordinator: z.object({ count: z.number(), ms: z.number() }),
    worker: z.object({ count: z.number(), ms: z.number() }),
  }),
  z.object({
    kind: z.literal('memory'),
    rss: z.number(),
    heapUsed: z.number(),
    /** Peaks since the process started (RSS from the OS, heap sampled every 200 ms). */
    peakRss: z.number(),
    peakHeapUsed: z.number(),
  }),
  z.object({ kind: z.literal('stopping'), why: z.string() }),
  /** A test-only fault this instance injects on itself, just before it does (see `BATON_CHAOS_DIE_AFTER_SENDING`). */
  z.object({
    kind: z.literal('chaos'),
    fault: z.literal('died-after-sending'),
    run: z.string(),
    first: z.number(),
    count: z.number(),
    dequeueCount: z.number(),
  }),
  z.object({ kind: z.literal('stopped') }),
  /** Drain mode reached: no invocation under way by the host's count (aborted ones ended). */
  z.object({ kind: z.literal('drained') }),
  /**
   * Baton's record of this instance's stop (`baton.instance.stopped`): how it came (`hook`,
   * `signal`), what became of the lease, and when it was back, ms after the stop began.
   */
  z.object({
    kind: z.literal('stop'),
    path: z.enum(['hook', 'signal', 'none']),
    lease: z.enum(['handed-over', 'released', 'not-released', 'not-held']),
    durationMs: z.optional(z.number()),
  }),
]);
export type InstanceEvent = z.infer<typeof instanceEventSchema>;

export function emit(event: InstanceEvent): void {
  process.stdout.write(`${JSON.stringify({ ...event, at: Date.now() })}\n`);
}

/** Parses one stdout line of an instance; anything else is passed on as plain output. */
export function parseInstanceLine(line: string): (InstanceEvent & { at?: number }) | undefined {
  if (!line.startsWith('{')) return undefined;
  try {
    const parsed = instanceEventSchema.safeParse(JSON.parse(line));
    return parsed.success ? { ...parsed.data, at: (JSON.parse(line) as { at?: number }).at } : undefined;
  } catch {
    return undefined;
  }
}
