import { randomUUID } from 'node:crypto';
import * as z from '../zod';
import { itemOutcomeSchema } from '../jobs/item-outcome';
import type { DocumentStore } from '../fencing/document-store';
import { MAX_QUEUE_MESSAGE_BYTES } from '../queue/queue-port';
import { runKeys } from '../hub/run-record';

/**
 * A run id names blobs (`runs/<run>/…`), so it must name its own: storage resolves `.` and `..`
 * segments (`sum/../sum/manual-x` reads run `sum/manual-x`), and a name past the blob limit, or
 * a poison note repeating it, fits nowhere. Real ids are `<job>/<occurrence or manual-uuid>`.
 */
export const runIdSchema = z.lazy(() =>
  z.string().check(
    z.minLength(1),
    z.maxLength(512),
    z.refine((id) => id.split('/').every((segment) => segment !== '' && segment !== '.' && segment !== '..'), {
      message: 'not a run id (an empty, "." or ".." segment)',
    }),
  ),
);

/**
 * A claim check points into its own run's claims: the leader deletes the claims of messages of
 * ended runs, so one pointing elsewhere would delete a blob another run still needs.
 */
function ownClaim(m: { run: string; claim?: string | undefined }): boolean {
  if (m.claim === undefined) return true;
  const prefix = runKeys.claimsPrefix(m.run);
  const name = m.claim.slice(prefix.length);
  return m.claim.startsWith(prefix) && name !== '' && name !== '.' && name !== '..' && !name.includes('/');
}
const OWN_CLAIM = { message: "must name a blob under its run's claims/", path: ['claim'] };

/** One work message: items `first … first + count − 1` of a run, inline or behind a claim check. */
export const workMessageSchema = z.lazy(() =>
  z
    .object({
      v: z.literal(1),
      t: z.literal('work'),
      run: runIdSchema,
      job: z.string().check(z.minLength(1)),
      first: z.int().check(z.nonnegative()),
      count: z.int().check(z.positive()),
      items: z.optional(z.array(z.unknown())),
      claim: z.optional(z.string()),
      /**
       * Tries its items have had already: a worker sends failed items back with the try they
       * failed on. Absent on a message as planned (and on a hedged copy, which is one).
       */
      tried: z.optional(z.int().check(z.positive(), z.lte(1000))),
    })
    .check(
      z.refine((m) => (m.items === undefined) !== (m.claim === undefined), 'exactly one of items and claim'),
      z.refine((m) => m.items === undefined || m.items.length === m.count, 'items.length must equal count'),
      z.refine(ownClaim, OWN_CLAIM),
    ),
);
export type WorkMessage = z.infer<typeof workMessageSchema>;

/** Items a result's retry note names at most; a message holds at most this many items. */
export const MAX_RETRY_NOTE_ITEMS = 1000;

/** Outcomes of some items of one run; only the items it names. */
export const resultMessageSchema = z.lazy(() =>
  z
    .object({
      v: z.literal(1),
      t: z.literal('result'),
      run: runIdSchema,
      job: z.string().check(z.minLength(1)),
      // A worker sends a result only when it has outcomes; an empty one would be consumed without a trace.
      outcomes: z.optional(z.array(itemOutcomeSchema).check(z.minLength(1))),
      claim: z.optional(z.string()),
      /**
       * How long the worker took over the message, in ms (hedged dispatch measures stragglers
       * against it). A result without one, or with one that is not a duration, still counts.
       */
      ms: z.catch(z.optional(z.number().check(z.nonnegative())), undefined),
      /**
       * The longest any item of the message held the worker's event loop before its first await,
       * in ms: the leader keeps its own worker from starting such items just before a run is due
       * (`ItemStartGate`). Optional like `ms`, and older leaders drop it.
       */
      held: z.catch(z.optional(z.number().check(z.nonnegative())), undefined),
      /**
       * Items of the message that failed this try and went back to the queue, to be tried again
       * `inMs` from now: not stragglers until then. A note the leader can do without, so a
       * malformed one is dropped rather than the outcomes with it.
       */
      retrying: z.catch(
        z.optional(
          z.object({
            items: z.array(z.int().check(z.nonnegative())).check(z.minLength(1), z.maxLength(MAX_RETRY_NOTE_ITEMS)),
            inMs: z.number().check(z.nonnegative()),
          }),
        ),
        undefined,
      ),
    })
    .check(
      z.refine(
        (m) =>
          (m.outcomes === undefined) !== (m.claim === undefined) ||
          (m.outcomes === undefined && m.claim === undefined && m.retrying),
        'exactly one of outcomes and claim (or only a retry note)',
      ),
      z.refine(ownClaim, OWN_CLAIM),
    ),
);
export type ResultMessage = z.infer<typeof resultMessageSchema>;

/**
 * A tick: whoever receives it runs the coordinator tick, as its timer would. `epoch` is the term
 * of the leader that sent it (0 for a start-up tick), so the receiver can tell a beacon whose
 * sender still leads from one a newer term has made moot. It travels on shard 0's work queue,
 * which every instance already polls.
 */
export const tickMessageSchema = z.lazy(() =>
  z.object({
    v: z.literal(1),
    t: z.literal('tick'),
    epoch: z.int().check(z.nonnegative()),
    /** Lead even while the lease rests: a request came that a leader must apply (`WAKE_TICK`). */
    wake: z.optional(z.literal(true)),
    /** A wake that found a leader and is looking once more (see `createTickMessageHandler`). */
    retried: z.optional(z.literal(true)),
  }),
);
export type TickMessage = z.infer<typeof tickMessageSchema>;

/** What a worker puts on the poison queue for a message it cannot use. */
export const poisonNoteSchema = z.lazy(() =>
  z.object({
    v: z.literal(1),
    t: z.literal('poison'),
    // A note is kept for its reason; one without (or only blanks) is unreadable, and kept as that.
    reason: z.string().check(z.refine((reason) => reason.trim() !== '', 'a poison note needs a reason that is not blank')),
    /** The original body, cut to fit. */
    body: z.string(),
    run: z.optional(z.string()),
  }),
);
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
    return { ok: false, reason: isBase64Json(raw) ? NOT_JSON_BUT_BASE64 : 'not JSON' };
  }
}

const NOT_JSON_BUT_BASE64 =
  'not JSON: the body is base64-encoded JSON; Baton sends and reads plain JSON (host.json messageEncoding "none")';

/**
 * Base64 is the Functions host's default message encoding, and the portal's and Storage
 * Explorer's: a sender or host left on it turns a good message into this. Saying so saves a hunt.
 */
function isBase64Json(text: string): boolean {
  if (text.length < 4 || text.length % 4 !== 0 || !/^[A-Za-z0-9+/]+={0,2}$/.test(text)) return false;
  try {
    const value: unknown = JSON.parse(Buffer.from(text, 'base64').toString('utf8'));
    return value !== null && typeof value === 'object';
  } catch {
    return false;
  }
}

/** Keeps a body small enough to travel inside a poison note. */
export function truncate(text: string, maxBytes = 16 * 1024): string {
  if (Buffer.byteLength(text) <= maxBytes) return text;
  return `${Buffer.from(text).subarray(0, maxBytes).toString('utf8')}…[truncated]`;
}
