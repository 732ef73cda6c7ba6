import { FakeClock } from '../../src/clock/fake-clock';
import { InMemoryLeaseStore } from '../../src/lease/in-memory-lease-store';
import { leaseStoreContract } from './lease-store.contract';

leaseStoreContract('InMemoryLeaseStore', async () => {
  const clock = new FakeClock();
  const store = new InMemoryLeaseStore({ clock });
  return {
    store,
    breakLease: async () => store.breakLease(),
    deleteRecord: async () => store.deleteRecord(),
    elapse: (ms) => clock.advance(ms),
  };
});
