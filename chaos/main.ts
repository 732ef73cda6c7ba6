#!/usr/bin/env node
import { Command, InvalidArgumentError, Option } from 'commander';
import { hubResources } from '../src/hub/resources';
import { BlobDocumentStore } from '../src/fencing/blob-document-store';
import { parseSyntheticJobs } from '../functions/synthetic-job';
import { createBlobServiceClient, createQueueServiceClient } from '../src/storage/client-factory';
import { parseStorageSettings } from '../src/storage/connection';
import { redactSecrets } from '../src/redact';
import { readAuditTrail } from './audit-trail';
import { DEFAULT_MIN_GAP_MS, FAULT_KINDS, type FaultKind } from './fault-plan';
import { checkInvariants } from './invariants';
import { formatCheck, formatSoakReport } from './report';
import { chaosExpectations, runSoak } from './soak';
import { readHubSnapshot } from './snapshot';

const positive = (what: string) => (value: string) => {
  const n = Number(value);
  if (!Number.isFinite(n) || n <= 0) throw new InvalidArgumentError(`${what} must be a positive number`);
  return n;
};
const wholeNumber = (what: string) => (value: string) => {
  if (!/^\d+$/.test(value)) throw new InvalidArgumentError(`${what} must be a whole number`);
  return Number(value);
};
const faultKinds = (value: string): FaultKind[] => {
  const kinds = value.split(',').map((k) => k.trim());
  const unknown = kinds.filter((k) => !(FAULT_KINDS as readonly string[]).includes(k));
  if (unknown.length)
    throw new InvalidArgumentError(`unknown fault kind ${unknown.join(', ')} (known: ${FAULT_KINDS.join(', ')})`);
  return kinds as FaultKind[];
};

export function chaosProgram(): Command {
  const program = new Command('chaos')
    .description('Chaos soak: real instances, a restartable Azurite, seeded faults, then an invariant check')
    .option('--minutes <m>', 'how long faults are injected', positive('--minutes'), 10)
    .option('--instances <n>', 'instance processes', wholeNumber('--instances'), 5)
    .option('--queue-shards <n>', 'BATON_QUEUE_SHARDS of every instance', wholeNumber('--queue-shards'), 1)
    .option('--seed <s>', 'seed of the fault schedule (default: random, printed)', wholeNumber('--seed'))
    .addOption(
      new Option('--faults <kinds>', `fault kinds, comma-separated (default all: ${FAULT_KINDS.join(',')})`).argParser(
        faultKinds,
      ),
    )
    .option(
      '--min-gap-seconds <s>',
      `least quiet time between two faults, on average (default ${DEFAULT_MIN_GAP_MS / 1000})`,
      wholeNumber('--min-gap-seconds'),
    )
    .option('--data <dir>', 'folder for Azurite, the audit trail, logs and report.json (kept)')
    .option('--keep', 'keep the data folder even when nothing was found', false)
    .option('--json', 'print report.json instead of the table', false)
    .option(
      '--slowdown <x>',
      "how much slower this machine is than the one the soak's waits were set on: they are multiplied by it (default 1)",
      positive('--slowdown'),
    )
    .option(
      '--no-hedge',
      'the test jobs without hedged dispatch: a run a straggler hit then waits for it (the straggler check must fail)',
    )
    .option(
      '--settle-seconds <s>',
      'longest wait for runs to end after the faults (default: longest job timeout + 20 s; 0: no settling, the check runs as the faults end)',
      wholeNumber('--settle-seconds'),
    )
    .action(
      async (opts: {
        minutes: number;
        instances: number;
        queueShards: number;
        seed?: number;
        faults?: FaultKind[];
        data?: string;
        keep: boolean;
        json: boolean;
        settleSeconds?: number;
        minGapSeconds?: number;
        slowdown?: number;
        hedge: boolean;
      }) => {
        const seed = opts.seed ?? Math.floor(Math.random() * 2 ** 31);
        const report = await runSoak({
          minutes: opts.minutes,
          instances: opts.instances,
          queueShards: opts.queueShards,
          seed,
          ...(opts.faults ? { kinds: opts.faults } : {}),
          ...(opts.data ? { data: opts.data } : {}),
          keep: opts.keep,
          hedge: opts.hedge,
          ...(opts.settleSeconds !== undefined ? { settleSeconds: opts.settleSeconds } : {}),
          ...(opts.minGapSeconds !== undefined ? { minGapSeconds: opts.minGapSeconds } : {}),
          ...(opts.slowdown !== undefined ? { slowdown: opts.slowdown } : {}),
          log: (line) => process.stderr.write(`${line}\n`),
        });
        process.stdout.write(opts.json ? `${JSON.stringify(report, null, 2)}\n` : `${formatSoakReport(report)}\n`);
        process.exitCode = report.check.violations.length ? 1 : 0;
      },
    );

  program
    .command('check')
    .description(
      'Check the invariants over a hub in any storage account; it only peeks at the queues, so a live app is undisturbed',
    )
    .option('--connection <setting>', 'name of the environment variable holding the connection', 'AzureWebJobsStorage')
    .option('--hub <hub>', 'the hub to check', 'baton')
    .option('--audit <file>', 'an audit trail (audit.ndjson from a soak) for the write-order checks')
    .addOption(
      new Option('--expect <jobs>', 'expected outputs: the soak jobs, BATON_SYNTHETIC_JOBS, or none')
        .choices(['soak', 'synthetic', 'none'])
        .default('none'),
    )
    .action(async (opts: { connection: string; hub: string; audit?: string; expect: 'soak' | 'synthetic' | 'none' }) => {
      const settings = parseStorageSettings(process.env, { prefix: opts.connection });
      const blobs = createBlobServiceClient(settings);
      const docs = new BlobDocumentStore(blobs.getContainerClient(hubResources(opts.hub).container));
      const snapshot = await readHubSnapshot(docs, createQueueServiceClient(settings), opts.hub, { leftovers: 'peek' });
      const expectations =
        opts.expect === 'soak'
          ? chaosExpectations()
          : opts.expect === 'synthetic'
            ? chaosExpectations(parseSyntheticJobs(process.env))
            : new Map();
      const check = await checkInvariants({
        ...snapshot,
        expectations,
        ...(opts.audit ? { audit: readAuditTrail(opts.audit) } : {}),
      });
      process.stdout.write(`${formatCheck(check).join('\n')}\n`);
      if (check.runsChecked === 0) process.stderr.write(`chaos check: hub ${opts.hub} has no runs: nothing was checked\n`);
      process.exitCode = check.violations.length || check.runsChecked === 0 ? 1 : 0;
    });
  return program;
}

if (require.main === module) {
  // Exiting runs the soak's exit hook, which kills every instance (a paused one included).
  for (const signal of ['SIGINT', 'SIGTERM'] as const) process.once(signal, () => process.exit(130));
  chaosProgram()
    .parseAsync(process.argv)
    .catch((err: unknown) => {
      process.stderr.write(`chaos: ${redactSecrets(err instanceof Error ? err.message : String(err))}\n`);
      process.exitCode = 2;
    });
}
