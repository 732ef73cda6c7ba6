import { describe, expect, it } from 'vitest';
import { expectTableOutcome, MALFORMED_CASES, runStaleEpoch, runTable } from '../../support/malformed-cases';
import { failOnUnhandledRejections, inMemoryHub } from '../../support/malformed-hub';

failOnUnhandledRejections();

describe('malformed input, one hand-made message at a time (in memory)', () => {
  it.each(MALFORMED_CASES.map((c) => [c.name, c] as const))('%s', async (_name, c) => {
    const { hub } = inMemoryHub();
    const run = await runTable(hub, [c]);
    await expectTableOutcome(hub, run);
  });
});

describe('malformed input, all together in one hub (in memory)', () => {
  it('every hand-made message arriving amid real traffic ends as its row says; unrelated runs finish exact', async () => {
    const { hub } = inMemoryHub();
    const run = await runTable(hub, MALFORMED_CASES);
    expect(run.cases).toHaveLength(MALFORMED_CASES.length);
    await expectTableOutcome(hub, run);
  });

  it(
    'stale epoch (messages carry no epoch; a stale leader is one older than the run record): ' +
      'its fold is refused by the fence, the results stay queued, and the newer leader counts each item once',
    async () => {
      const { hub, clock } = inMemoryHub();
      await runStaleEpoch(hub, () => clock.advance(hub.ctx.tuning.drainVisibilitySeconds * 1000));
    },
  );
});
