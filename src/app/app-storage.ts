import type { BlobServiceClient } from '@azure/storage-blob';
import { createBlobServiceClient } from '../storage/client-factory';
import { parseStorageSettings } from '../storage/connection';

export interface AppStorageOptions {
  /**
   * The connection, named as the Functions host names one: a setting that holds a connection
   * string, or the prefix of identity-based settings (`<connection>__blobServiceUri` and
   * `__queueServiceUri`, or `__accountName`; `__credential` and `__clientId` for a user-assigned
   * identity). Default `AzureWebJobsStorage`, the one Baton's hub uses.
   */
  connection?: string;
  /** The settings to read. Default `process.env`. */
  env?: Record<string, string | undefined>;
}

/**
 * A blob client for one of the app's storage connections, read by the rules Baton reads its own
 * by, so a job can reach the app's account with a key locally and with the app's managed
 * identity on Azure without code of its own. A missing or malformed setting throws an
 * `InvalidSettingError` naming it; nothing is sent to storage until the client is used.
 */
export function blobServiceClient(options: AppStorageOptions = {}): BlobServiceClient {
  const settings = parseStorageSettings(options.env ?? process.env, { prefix: options.connection ?? 'AzureWebJobsStorage' });
  return createBlobServiceClient(settings);
}
