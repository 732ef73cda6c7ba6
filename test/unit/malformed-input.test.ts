import { describe, expect, it } from 'vitest';
import { FakeClock } from '../../src/clock/fake-clock';
import { InMemoryDocumentStore } from '../../src/fencing/in-memory-document-store';
import { InMemoryQueue } from '../../src/queue/in-memory-queue';
import { expectTableOutcome, MALFORMED_CASES, runStaleEpoch, runTable } from '../support/malformed-cases';
import { failOnUnhandledRejections, MalformedHub } from '../support/malformed-hub';

failOnUnhandledRejections();

function memoryHub(): { hub: MalformedHub; clock: FakeClock } {
  const clock = new FakeClock();
  const hub = new MalformedHub(
    {
      docs: new InMemoryDocumentStore(),
      work: new InMemoryQueue('work', { clock }),
      results: new InMemoryQueue('results', { clock }),
      poison: new InMemoryQueue('work-poison', { clock }),
    },
    clock,
  );
  return { hub, clock };
}

describe('malformed input, one hand-made message at a time (in memory)', () => {
  it.each(MALFORMED_CASES.map((c) => [c.name, c] as const))('%s', async (_name, c) => {
    const { hub } = memoryHub();
    const run = await runTable(hub, [c]);
    await expectTableOutcome(hub, run);
  });
});

describe('malformed input, all together in one hub (in memory)', () => {
  it('every hand-made message arriving amid real traffic ends as its row says; unrelated runs finish exact', async () => {
    const { hub } = memoryHub();
    const run = await runTable(hub, MALFORMED_CASES);
    expect(run.cases).toHaveLength(MALFORMED_CASES.length);
    await expectTableOutcome(hub, run);
  });

  it(
    'stale epoch (messages carry no epoch; a stale leader is one older than the run record): ' +
      'its fold is refused by the fence, the results stay queued, and the newer leader counts each item once',
    async () => {
      const { hub, clock } = memoryHub();
      await runStaleEpoch(hub, () => clock.advance(hub.ctx.tuning.drainVisibilitySeconds * 1000));
    },
  );
});
