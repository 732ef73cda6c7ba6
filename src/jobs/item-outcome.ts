import * as z from 'zod';

/** What became of one item: its result, or why it failed and on which delivery. */
export const itemOutcomeSchema = z.lazy(() =>
  z.discriminatedUnion('ok', [
    z.object({ i: z.number().int().nonnegative(), ok: z.literal(true), r: z.unknown() }),
    z.object({ i: z.number().int().nonnegative(), ok: z.literal(false), e: z.string(), a: z.number().int().positive() }),
  ]),
);
export type ItemOutcome = z.infer<typeof itemOutcomeSchema>;
