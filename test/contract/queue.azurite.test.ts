import { setTimeout as delay } from 'node:timers/promises';
import { AzureQueue } from '../../src/queue/azure-queue';
import { useAzurite } from '../support/azurite';
import { queueContract } from './queue.contract';

const fixture = useAzurite();

queueContract('AzureQueue on Azurite', async () => ({
  queue: new AzureQueue(fixture.queueService, fixture.uniqueName('q')),
  elapse: (ms) => delay(ms),
}));
