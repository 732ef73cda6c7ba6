import { randomUUID } from 'node:crypto';
import { z } from 'zod';
import type { DocumentStore } from '../fencing/document-store';
import { MAX_QUEUE_MESSAGE_BYTES } from '../queue/queue-port';
import { runKeys } from '../runs/run-record';

/** One work message: items `first … first + count − 1` of a run, inline or behind a claim check. */
export const workMessageSchema = z
  .object({
    v: z.literal(1),
    t: z.literal('work'),
    run: z.string().min(1),
    job: z.string().min(1),
    first: z.number().int().nonnegative(),
    count: z.number().int().positive(),
    items: z.array(z.unknown()).optional(),
    claim: z.string().optional(),
  })
  .refine((m) => (m.items === undefined) !== (m.claim === undefined), 'exactly one of items and claim')
  .refine((m) => m.items === undefined || m.items.length === m.count, 'items.length must equal count');
export type WorkMessage = z.infer<typeof workMessageSchema>;

export const itemOutcomeSchema = z.discriminatedUnion('ok', [
  z.object({ i: z.number().int().nonnegative(), ok: z.literal(true), r: z.unknown() }),
  z.object({ i: z.number().int().nonnegative(), ok: z.literal(false), e: z.string(), a: z.number().int().positive() }),
]);
export type ItemOutcome = z.infer<typeof itemOutcomeSchema>;

/** Outcomes of some items of one run; only the items it names. */
export const resultMessageSchema = z
  .object({
    v: z.literal(1),
    t: z.literal('result'),
    run: z.string().min(1),
    job: z.string().min(1),
    outcomes: z.array(itemOutcomeSchema).optional(),
    claim: z.string().optional(),
  })
  .refine((m) => (m.outcomes === undefined) !== (m.claim === undefined), 'exactly one of outcomes and claim');
export type ResultMessage = z.infer<typeof resultMessageSchema>;

/** What a worker puts on the poison queue for a message it cannot use. */
export const poisonNoteSchema = z.object({
  v: z.literal(1),
  t: z.literal('poison'),
  reason: z.string(),
  /** The original body, cut to fit. */
  body: z.string(),
  run: z.string().optional(),
});
export type PoisonNote = z.infer<typeof poisonNoteSchema>;

/**
 * Serializes `message`; when it would not fit a queue message, stores the bulky part in a blob
 * and sends a claim check instead. Claims live under the run, and go when the run ends.
 */
export async function encodeWithClaimCheck<M extends { run: string }>(
  message: M,
  bulky: keyof M,
  docs: DocumentStore,
  options: { abortSignal?: AbortSignal } = {},
): Promise<string> {
  const text = JSON.stringify(message);
  if (Buffer.byteLength(text) <= MAX_QUEUE_MESSAGE_BYTES) return text;
  const key = runKeys.claim(message.run, randomUUID());
  await docs.write(key, JSON.stringify(message[bulky]), { ifNoneMatch: '*' }, options);
  const { [bulky]: _omitted, ...rest } = message;
  void _omitted;
  return JSON.stringify({ ...rest, claim: key });
}

export class ClaimMissingError extends Error {
  constructor(readonly key: string) {
    super(`claim-check blob ${key} is missing`);
    this.name = 'ClaimMissingError';
  }
}

/** Loads the part a claim check stands for. */
export async function loadClaim(key: string, docs: DocumentStore, options: { abortSignal?: AbortSignal } = {}): Promise<unknown> {
  const stored = await docs.read(key, options);
  if (!stored) throw new ClaimMissingError(key);
  return JSON.parse(stored.body) as unknown;
}

/**
 * Parses a queue body. The Functions host hands over JSON bodies already parsed, and strings
 * otherwise; a local host or the leader hands over text.
 */
export function parseBody(raw: unknown): { ok: true; value: unknown } | { ok: false; reason: string } {
  if (typeof raw !== 'string') {
    if (raw !== null && typeof raw === 'object') return { ok: true, value: raw };
    return { ok: false, reason: `not JSON: a ${raw === null ? 'null' : typeof raw} body` };
  }
  try {
    return { ok: true, value: JSON.parse(raw) as unknown };
  } catch {
    return { ok: false, reason: 'not JSON' };
  }
}

/** The first problem zod found, as one short line. */
export function describeIssue(error: z.ZodError): string {
  const issue = error.issues[0];
  if (!issue) return 'invalid';
  return `${issue.path.length ? `${issue.path.join('.')}: ` : ''}${issue.message}`;
}

/** Keeps a body small enough to travel inside a poison note. */
export function truncate(text: string, maxBytes = 16 * 1024): string {
  if (Buffer.byteLength(text) <= maxBytes) return text;
  return `${Buffer.from(text).subarray(0, maxBytes).toString('utf8')}…[truncated]`;
}
