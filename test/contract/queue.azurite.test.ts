import { setTimeout as delay } from 'node:timers/promises';
import { AzureQueue } from '../../src/queue/azure-queue';
import { useAzurite } from '../support/azurite';
import { useAzureBehaviour } from '../support/azure-behaviour';
import { queueContract } from './queue.contract';

const fixture = useAzurite();
// Every client here answers as Azure does where Azurite 3.37 does not (docs/testing.md).
const azure = useAzureBehaviour(fixture);

queueContract('AzureQueue on Azurite', async () => ({
  queue: new AzureQueue(azure.queueService, fixture.uniqueName('q')),
  elapse: (ms) => delay(ms),
}));
