import { InMemoryDocumentStore } from '../../src/fencing/in-memory-document-store';
import { InMemoryLeaseStore } from '../../src/lease/in-memory-lease-store';
import { InMemoryQueue } from '../../src/queue/in-memory-queue';
import type { EnginePorts } from './engine-harness';

/** Engine ports in memory on the system clock: the whole engine, fast, without Azurite. */
export function memoryPorts(): EnginePorts & {
  docs: InMemoryDocumentStore;
  results: InMemoryQueue;
  poison: InMemoryQueue;
  work: InMemoryQueue;
} {
  const lease = new InMemoryLeaseStore();
  return {
    docs: new InMemoryDocumentStore(),
    work: new InMemoryQueue('work'),
    results: new InMemoryQueue('results'),
    poison: new InMemoryQueue('work-poison'),
    leases: () => lease,
  };
}
