import { describe, expect, it } from 'vitest';
import { systemClock } from '../../src/clock/clock';
import type { EngineTuning } from '../../src/engine/engine-context';
import { useAzurite } from '../support/azurite';
import { azuritePorts } from '../support/azurite-engine';
import { expectTableOutcome, MALFORMED_CASES, runStaleEpoch, runTable } from '../support/malformed-cases';
import { failOnUnhandledRejections, MalformedHub } from '../support/malformed-hub';

const fixture = useAzurite();
failOnUnhandledRejections();

async function azuriteHub(prefix: string, tuning: Partial<EngineTuning> = {}): Promise<{ hub: MalformedHub; hubName: string }> {
  const ports = azuritePorts(fixture, prefix);
  await Promise.all([ports.work, ports.results, ports.poison].map((q) => q.ensure()));
  return { hub: new MalformedHub(ports, systemClock, tuning), hubName: ports.hub };
}

describe('malformed input on Azurite (real queue and blob clients)', () => {
  it('the hand-made table amid real traffic: every message ends as its row says; unrelated runs finish exact', async () => {
    const { hub, hubName } = await azuriteHub('malformed');
    const run = await runTable(hub, MALFORMED_CASES);
    await expectTableOutcome(hub, run);

    // The service itself refuses a body over its 64 KiB limit, whatever client sends it.
    const raw = fixture.queueService.getQueueClient(`${hubName}-work`);
    await expect(raw.sendMessage('x'.repeat(70 * 1024))).rejects.toMatchObject({ statusCode: 413 });
    expect(await hub.leftOnQueues()).toBe(0);
  });

  it(
    'stale epoch (messages carry no epoch; a stale leader is one older than the run record): ' +
      'its fold is refused by the fence, the results stay queued, and the newer leader counts each item once',
    async () => {
      const { hub } = await azuriteHub('stale', { drainVisibilitySeconds: 1 });
      await runStaleEpoch(hub, () => new Promise((resolve) => setTimeout(resolve, 1100)));
    },
  );
});
