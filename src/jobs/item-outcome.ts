import * as z from '../zod';

/** What became of one item: its result, or why it failed and on which delivery. */
export const itemOutcomeSchema = z.lazy(() =>
  z.discriminatedUnion('ok', [
    z.object({ i: z.int().check(z.nonnegative()), ok: z.literal(true), r: z.unknown() }),
    z.object({ i: z.int().check(z.nonnegative()), ok: z.literal(false), e: z.string(), a: z.int().check(z.positive()) }),
  ]),
);
export type ItemOutcome = z.infer<typeof itemOutcomeSchema>;

/** The outcomes a claim-check blob holds for one message: at least one. */
export const claimedOutcomesSchema = z.lazy(() => z.array(itemOutcomeSchema).check(z.minLength(1)));
