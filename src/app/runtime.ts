import { BlobLeaseStore } from '../lease/blob-lease-store';
import { LeaderElector } from '../lease/leader-elector';
import type { LeaderLogger } from '../lease/elector-options';
import { createBlobServiceClient, LEASE_RETRY_OPTIONS } from '../storage/client-factory';
import { parseBatonSettings, parseStorageSettings, type BatonSettings, type Env } from '../storage/settings';

/** What one Functions worker process shares across invocations. */
export interface BatonRuntime {
  settings: BatonSettings;
  elector: LeaderElector;
}

/**
 * Builds the process-wide runtime from app settings. Throws `InvalidSettingError` (one line,
 * naming the setting) on the first bad setting, so a misconfigured app fails at start-up rather
 * than on its first tick.
 */
export function createBatonRuntime(
  env: Env = process.env,
  options: { logger?: LeaderLogger; identity?: string } = {},
): BatonRuntime {
  const storage = parseStorageSettings(env);
  const settings = parseBatonSettings(env);
  const leaseClient = createBlobServiceClient(storage, { retryOptions: LEASE_RETRY_OPTIONS });
  const store = new BlobLeaseStore(leaseClient, settings.hub, { containerName: settings.leaseContainer });
  const elector = new LeaderElector({
    store,
    leaseDurationSeconds: settings.leaseDurationSeconds,
    ...(options.identity ? { identity: options.identity } : {}),
    ...(options.logger ? { logger: options.logger } : {}),
  });
  return { settings, elector };
}
