import { FakeClock } from '../../src/clock/fake-clock';
import { InMemoryQueueDirectory } from '../../src/queue/in-memory-queue';
import { queueDirectoryContract } from './queue-directory.contract';

let n = 0;
queueDirectoryContract('InMemoryQueueDirectory', async () => ({
  directory: new InMemoryQueueDirectory({ clock: new FakeClock() }),
  prefix: `dir${n++}`,
}));
