import { existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { hubResources } from '../app/runtime';
import { listRuns, readHubStatus } from '../engine/status';
import { BlobDocumentStore } from '../fencing/blob-document-store';
import { BlobLeaseStore } from '../lease/blob-lease-store';
import { startAzurite, type RunningAzurite } from '../local/azurite';
import { isTerminal } from '../runs/run-record';
import { expectedSynthetic, type SyntheticJobSpec } from '../sample/synthetic-job';
import { createBlobServiceClient, createQueueServiceClient, LEASE_RETRY_OPTIONS } from '../storage/client-factory';
import { storageErrorOf } from '../storage/rest-error';
import { auditEntryOf, AuditTrailWriter, isAuditedWrite, readAuditTrail } from './audit-trail';
import { ChaosInstances } from './chaos-instances';
import { FAULT_KINDS, planFaults, type FaultKind, type FaultStep } from './fault-plan';
import { FaultProxy, type ProxyAction } from './fault-proxy';
import { checkInvariants, type CheckResult, type Expectation } from './invariants';
import { SeededRandom } from './rng';
import { readHubSnapshot } from './snapshot';

export interface SoakOptions {
  minutes: number;
  instances: number;
  seed: number;
  /** Fault kinds to inject; default all. */
  kinds?: readonly FaultKind[];
  /** Where Azurite persists, and where the audit trail, logs and report go. Default: a new temp folder. */
  data?: string;
  /** Keep the data folder afterwards (it is kept anyway when a violation is found). */
  keep?: boolean;
  hub?: string;
  /**
   * Longest wait for runs to end, in each settling phase, and for queues to empty. Default: the
   * longest job timeout plus 20 s, which the invariants need; shorter only to see violations sooner.
   */
  settleSeconds?: number;
  log: (line: string) => void;
}

export interface SoakReport {
  seed: number;
  minutes: number;
  instances: number;
  kinds: FaultKind[];
  faults: Record<FaultKind, number>;
  /** Requests the proxies disturbed, by action. */
  proxy: Record<ProxyAction, number> & { forwarded: number };
  leaderChanges: number;
  /** From the first fault to the last one's end, and from then until every run had ended. */
  faultMs: number;
  settleMs: number;
  check: CheckResult;
  data: string;
  kept: boolean;
}

/**
 * The soak's test jobs: every 20 s, known outputs, items that fail on every attempt, and (in
 * the second) items slower than a lease, so a worker outlives the leader that sent it work.
 */
export const CHAOS_JOBS: SyntheticJobSpec[] = [
  {
    name: 'chaos-sum',
    schedule: '0,20,40 * * * * *',
    items: 400,
    itemsPerMessage: 4,
    failEvery: 37,
    failureTolerance: { percent: 10 },
    timeoutSeconds: 120,
  },
  {
    name: 'chaos-slow',
    schedule: '10,30,50 * * * * *',
    items: 60,
    itemsPerMessage: 1,
    failEvery: 11,
    slowEvery: 30,
    slowMs: 17_000,
    failureTolerance: { percent: 20 },
    timeoutSeconds: 150,
  },
];
/** The same jobs with a schedule that never comes round, for the settling phase after the faults. */
const SETTLING_JOBS = CHAOS_JOBS.map((job) => ({ ...job, schedule: '0 0 0 1 1 *' }));

// Failed items are retried after 1 s, not 30 s as in the app's host.json, so a failing item costs
// seconds, not two minutes; five deliveries leave room for those a kill or a lost answer burns.
const CHAOS_HOST_JSON = {
  version: '2.0',
  extensions: {
    queues: {
      batchSize: 16,
      newBatchThreshold: 8,
      maxDequeueCount: 5,
      visibilityTimeout: '00:00:01',
      messageEncoding: 'none',
      maxPollingInterval: '00:00:01',
    },
  },
};
const LEASE_SECONDS = 15;
const QUEUE_SETTLE_MS = 45_000;
const MIN_QUIET_MS = 4000;

/** Expected outputs of synthetic jobs; the soak's own jobs must also succeed, as their failures are within tolerance. */
export function chaosExpectations(
  jobs: readonly SyntheticJobSpec[] = CHAOS_JOBS,
  requireSuccess = jobs === CHAOS_JOBS,
): Map<string, Expectation> {
  return new Map(
    jobs.map((spec) => {
      const { output, failed } = expectedSynthetic(spec);
      return [spec.name, { planned: spec.items, output, failed, ...(requireSuccess ? { state: 'succeeded' as const } : {}) }];
    }),
  );
}

/**
 * A chaos soak: a persistent Azurite behind two fault proxies (blob and queue), N instance
 * processes running the test jobs, and a seeded schedule of faults. Then the faults stop, the
 * instances are redeployed with the schedules off so open runs can end, and every run is
 * checked against the invariants, with the audit trail the blob proxy took off the wire.
 */
export async function runSoak(options: SoakOptions): Promise<SoakReport> {
  const hub = options.hub ?? 'chaos';
  const kinds = [...(options.kinds ?? FAULT_KINDS)];
  if (options.data && existsSync(options.data) && readdirSync(options.data).length > 0) {
    throw new Error(`--data ${options.data} is not empty: a soak starts from empty storage and a new audit trail`);
  }
  const data = options.data ?? mkdtempSync(join(tmpdir(), 'baton-chaos-'));
  mkdirSync(data, { recursive: true });
  const azuriteDir = join(data, 'azurite');
  const container = hubResources(hub).container;
  const audit = new AuditTrailWriter(join(data, 'audit.ndjson'));
  writeFileSync(audit.file, '');
  writeFileSync(join(data, 'host.json'), JSON.stringify(CHAOS_HOST_JSON, null, 2));

  let azurite: RunningAzurite = await startAzurite({ persistTo: azuriteDir });
  const blobProxy = await FaultProxy.start({
    upstreamHost: '127.0.0.1',
    upstreamPort: azurite.blobPort,
    seed: options.seed,
    captureBody: (method, url) => isAuditedWrite(method, url, container),
    onExchange: (exchange) => {
      const entry = auditEntryOf(exchange, container);
      if (entry) audit.append(entry);
    },
  });
  const queueProxy = await FaultProxy.start({
    upstreamHost: '127.0.0.1',
    upstreamPort: azurite.queuePort,
    seed: options.seed + 1,
  });
  const proxies = [blobProxy, queueProxy];
  // The instances reach storage only through the proxies; the soak itself goes direct.
  const proxied = azurite.connectionString
    .replace(/BlobEndpoint=http:\/\/[^/]+/, `BlobEndpoint=http://127.0.0.1:${blobProxy.port}`)
    .replace(/QueueEndpoint=http:\/\/[^/]+/, `QueueEndpoint=http://127.0.0.1:${queueProxy.port}`);
  let jobs: SyntheticJobSpec[] = CHAOS_JOBS;
  const instances = new ChaosInstances(
    () => ({
      ...inheritedEnv(),
      AzureWebJobsStorage: proxied,
      BATON_HUB: hub,
      BATON_LEASE_SECONDS: String(LEASE_SECONDS),
      BATON_COORDINATOR_SCHEDULE: '* * * * * *',
      BATON_MAX_IN_FLIGHT: '256',
      BATON_MAX_ATTEMPTS: String(CHAOS_HOST_JSON.extensions.queues.maxDequeueCount),
      BATON_HOST_JSON: join(data, 'host.json'),
      BATON_SYNTHETIC_JOBS: JSON.stringify(jobs),
    }),
    join(data, 'instances.log'),
  );
  const direct = () => createBlobServiceClient({ kind: 'connectionString', connectionString: azurite.connectionString });
  const leaseStore = (): BlobLeaseStore =>
    new BlobLeaseStore(
      createBlobServiceClient(
        { kind: 'connectionString', connectionString: azurite.connectionString },
        { retryOptions: LEASE_RETRY_OPTIONS },
      ),
      hub,
    );
  const leaseHolder = async (): Promise<string | undefined> => {
    const lease = await leaseStore()
      .read()
      .catch(() => undefined);
    return lease?.leased ? lease.holder : undefined;
  };
  const waitForLeader = async (withinMs: number): Promise<string | undefined> => {
    const until = Date.now() + withinMs;
    for (;;) {
      const holder = await leaseHolder();
      if (holder && instances.byName(holder)) return holder;
      if (Date.now() > until) return undefined;
      await sleep(250);
    }
  };

  const docs = new BlobDocumentStore(direct().getContainerClient(container));
  // Pauses and broken leases are aimed at a leader with work in hand, where they can do harm.
  const waitForOpenRun = async (withinMs: number): Promise<void> => {
    const until = Date.now() + withinMs;
    while (Date.now() < until) {
      const status = await readHubStatus(docs, leaseStore()).catch(() => undefined);
      if (status?.activeRuns.length) return;
      await sleep(250);
    }
  };

  const faults = Object.fromEntries(FAULT_KINDS.map((k) => [k, 0])) as Record<FaultKind, number>;
  const rng = new SeededRandom(options.seed ^ 0x5eed);
  const inject = async (step: FaultStep): Promise<boolean> => {
    switch (step.kind) {
      case 'kill': {
        const victim = rng.pick(instances.alive);
        instances.log(`fault: kill -9 ${victim.name}`);
        victim.proc.kill('SIGKILL');
        await sleep(step.restartAfterMs);
        instances.spawn();
        return true;
      }
      case 'pause': {
        await waitForOpenRun(10_000);
        const leader = instances.byName(await waitForLeader(15_000));
        if (!leader) return false;
        instances.log(`fault: SIGSTOP ${leader.name} (the leader) for ${step.pauseMs} ms`);
        leader.proc.kill('SIGSTOP');
        await sleep(step.pauseMs);
        leader.proc.kill('SIGCONT');
        return true;
      }
      case 'storage-restart': {
        instances.log(`fault: storage restart, down ${step.downMs} ms`);
        await Promise.all(proxies.map((proxy) => proxy.setUpstreamDown(true)));
        await azurite.close();
        await sleep(step.downMs);
        azurite = await startAzurite({ persistTo: azuriteDir, blobPort: azurite.blobPort, queuePort: azurite.queuePort });
        await Promise.all(proxies.map((proxy) => proxy.setUpstreamDown(false)));
        return true;
      }
      case 'proxy': {
        instances.log(`fault: proxy faults for ${step.windowMs} ms`);
        for (const proxy of proxies) proxy.setProfile(step.profile);
        await sleep(step.windowMs);
        for (const proxy of proxies) proxy.setProfile(undefined);
        return true;
      }
      case 'lease-break': {
        await waitForOpenRun(10_000);
        const holder = await waitForLeader(15_000);
        const leader = instances.byName(holder);
        if (!leader) return false;
        // Right after a renewal the leader believes in its lease longest: a whole renew interval
        // in which a successor already leads. That is the window fencing has to cover.
        const since = Date.now();
        while (Date.now() - since < LEASE_SECONDS * 1000 && !((leader.lastRenewedAt ?? 0) > since)) await sleep(25);
        try {
          await direct().getContainerClient('leases').getBlobClient(hub).getBlobLeaseClient().breakLease(0);
        } catch (err) {
          if (storageErrorOf(err)?.status !== 409) throw err;
          return false; // the lease ended on its own meanwhile
        }
        instances.log(`fault: lease of ${leader.name} broken by an outside client`);
        return true;
      }
    }
  };

  const report = async (): Promise<SoakReport> => {
    const steps = planFaults({ seed: options.seed, durationMs: options.minutes * 60_000, kinds, leaseSeconds: LEASE_SECONDS });
    // The app's own sample job runs hourly beside the test jobs; give it an (empty) container to audit.
    await direct().getContainerClient('audit-demo').createIfNotExists();
    for (let i = 0; i < options.instances; i++) instances.spawn();
    if (!(await waitForLeader(30_000))) throw new Error('no instance took the lease within 30 s of starting');
    const start = Date.now();
    options.log(
      `soak: ${options.instances} instances, ${steps.length} faults planned over ${options.minutes} min, seed ${options.seed}`,
    );
    let lastEnd = start;
    for (const step of steps) {
      // Planned times hold unless a fault overran (it waits for a leader or an open run); the
      // next one still gets a quiet gap, so runs make progress between faults.
      const wait = Math.max(start + step.atMs, lastEnd + MIN_QUIET_MS) - Date.now();
      if (wait > 0) await sleep(wait);
      let injected = await inject(step);
      // A fault that found nothing to act on (no leader yet) is tried once more.
      if (!injected) injected = await inject(step);
      if (injected) faults[step.kind]++;
      lastEnd = Date.now();
      options.log(`  ${((lastEnd - start) / 1000).toFixed(0).padStart(4)} s  ${step.kind}${injected ? '' : ' (not injected)'}`);
    }
    const faultsStoppedAt = Date.now();
    const longest = (options.settleSeconds ?? Math.max(...CHAOS_JOBS.map((j) => j.timeoutSeconds ?? 0)) + 20) * 1000;
    const allEnded = async (createdBy = Infinity): Promise<boolean> => {
      const runs = await listRuns(docs).catch(() => undefined);
      return runs !== undefined && runs.filter((r) => Date.parse(r.createdAt) <= createdBy).every((r) => isTerminal(r.state));
    };
    // The processes that lived through the faults must end the runs the faults hit, on their own.
    options.log('soak: faults stopped; waiting for the runs they hit to end');
    while (Date.now() < faultsStoppedAt + longest && !(await allEnded(faultsStoppedAt))) await sleep(1000);
    const settledAt = Date.now();
    // Then a deploy with the schedules off, so the runs started since can end and none begins.
    options.log('soak: redeploying with the schedules off so the runs started since can end');
    await instances.stopAll();
    jobs = SETTLING_JOBS;
    for (let i = 0; i < options.instances; i++) instances.spawn();
    const redeployedAt = Date.now();
    while (Date.now() < redeployedAt + longest && !(await allEnded())) await sleep(1000);
    // Results of ended runs are swept by the leader's idle drain; give it time to come round.
    const queues = createQueueServiceClient({ kind: 'connectionString', connectionString: azurite.connectionString });
    const names = hubResources(hub);
    const queued = async (): Promise<number> => {
      const counts = await Promise.all(
        [names.workQueue, names.resultsQueue].map((q) =>
          queues
            .getQueueClient(q)
            .getProperties()
            .then(
              (p) => p.approximateMessagesCount ?? 0,
              () => 0,
            ),
        ),
      );
      return counts.reduce((a, b) => a + b, 0);
    };
    const drainFrom = Date.now();
    while (Date.now() - drainFrom < Math.min(QUEUE_SETTLE_MS, longest) && (await queued()) > 0) await sleep(1000);
    await instances.stopAll();
    // Messages a stopped instance held stay hidden until their visibility timeout ends.
    if ((await queued()) > 0) await sleep(Math.min(31_000, longest));
    const snapshot = await readHubSnapshot(docs, queues, hub);
    const check = checkInvariants({
      ...snapshot,
      expectations: chaosExpectations(),
      audit: readAuditTrail(audit.file),
      faultsStoppedAt,
    });
    return {
      seed: options.seed,
      minutes: options.minutes,
      instances: options.instances,
      kinds,
      faults,
      proxy: { ...sumCounts(proxies), forwarded: proxies.reduce((n, p) => n + p.forwarded, 0) },
      leaderChanges: instances.leaderChanges,
      faultMs: faultsStoppedAt - start,
      settleMs: settledAt - faultsStoppedAt,
      check,
      data,
      kept: true,
    };
  };

  // If this process dies, no instance may outlive it (a SIGSTOPped one would never see its stdin close).
  const killChildren = (): void => instances.killAllNow();
  process.on('exit', killChildren);
  let result: SoakReport | undefined;
  try {
    result = await report();
    result.kept = Boolean(options.keep) || options.data !== undefined || result.check.violations.length > 0;
    writeFileSync(join(data, 'report.json'), `${JSON.stringify(result, null, 2)}\n`);
    return result;
  } finally {
    await instances.stopAll(2000);
    process.off('exit', killChildren);
    for (const proxy of proxies) await proxy.close();
    await azurite.close();
    // Kept when asked, when something was found, or when the soak itself failed.
    if (result && !result.kept) rmSync(data, { recursive: true, force: true });
  }
}

/**
 * The environment for instances: the soak sets every app setting itself, so none is inherited (a
 * lease container or hub left in the shell would point them where the soak does not look). The
 * test-only fencing switch passes through, as the broken-build test needs it to.
 */
function inheritedEnv(): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [key, value] of Object.entries(process.env)) if (!/^(BATON_|AzureWebJobs)/i.test(key)) env[key] = value;
  if (process.env.BATON_UNSAFE_DISABLE_FENCING) env.BATON_UNSAFE_DISABLE_FENCING = process.env.BATON_UNSAFE_DISABLE_FENCING;
  return env;
}

function sumCounts(proxies: readonly FaultProxy[]): Record<ProxyAction, number> {
  const out: Record<ProxyAction, number> = { latency: 0, unavailable: 0, resetBefore: 0, resetAfter: 0, refused: 0 };
  for (const proxy of proxies) for (const key of Object.keys(out) as ProxyAction[]) out[key] += proxy.counts[key];
  return out;
}
