import { FakeClock } from '../../src/clock/fake-clock';
import { InMemoryHandoverRequestStore } from '../../src/lease/in-memory-handover-request-store';
import { handoverRequestStoreContract } from './handover-request-store.contract';

handoverRequestStoreContract('InMemoryHandoverRequestStore', async () => {
  const clock = new FakeClock();
  return { store: new InMemoryHandoverRequestStore({ clock }), elapse: (ms) => clock.advance(ms) };
});
