import { AzureQueueDirectory } from '../../src/queue/azure-queue';
import { useAzurite } from '../support/azurite';
import { queueDirectoryContract } from './queue-directory.contract';

const fixture = useAzurite();

queueDirectoryContract('AzureQueueDirectory on Azurite', async () => ({
  directory: new AzureQueueDirectory(fixture.queueService),
  prefix: fixture.uniqueName('dir'),
}));
