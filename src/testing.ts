// `baton-functions/testing`: what tests of a Baton app need, kept out of the main entry so an app never
// ships a fake by mistake. Each in-memory store passes the same contract suite as its Azure one.

export { FakeClock } from './clock/fake-clock';
export { InMemoryLeaseStore } from './lease/in-memory-lease-store';
export { InMemoryHandoverRequestStore } from './lease/in-memory-handover-request-store';
export { InMemoryDocumentStore } from './fencing/in-memory-document-store';
export { InMemoryQueue } from './queue/in-memory-queue';
export type { QueuePort, ReceivedMessage, MessageReceipt, QueueCallOptions } from './queue/queue-port';
export { startAzurite } from './local/azurite';
export type { StartAzuriteOptions, RunningAzurite } from './local/azurite';
export { runJobOnce } from './local/run-job-once';
export type { RunJobOnceOptions, JobRunResult } from './local/run-job-once';
export type { SetupContext } from './local/setup-module';
