import { isBatonError } from '../errors';
import { redactSecrets } from '../redact';
import { CliError, type ConnectionSource } from './connection';
import { StorageTimeoutError } from './hub';
import { EXIT } from './exit-codes';

export { EXIT };

/** Network-level codes that mean the endpoint cannot be reached at all. */
const UNREACHABLE_CODES = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ECONNABORTED',
  'ENOTFOUND',
  'EAI_AGAIN',
  'EAI_FAIL',
  'ETIMEDOUT',
  'ESOCKETTIMEDOUT',
  'EHOSTUNREACH',
  'EHOSTDOWN',
  'ENETUNREACH',
  'ENETDOWN',
  'EPIPE',
  'UND_ERR_CONNECT_TIMEOUT',
]);

const LOCAL_HOSTS = new Set(['127.0.0.1', 'localhost', '[::1]', '::1']);

export interface Failure {
  line: string;
  exitCode: number;
}

/** Where storage is, for messages about it; absent before the connection is resolved. */
export interface FailureContext {
  endpoint: string;
  source: ConnectionSource;
}

/** The one line (without the `baton: ` prefix) and exit code for an error a command threw. */
export function describeFailure(err: unknown, where?: FailureContext): Failure {
  if (err instanceof CliError) return { line: oneLine(err.message), exitCode: err.exitCode };
  const code = networkCode(err);
  if (where && code !== undefined && UNREACHABLE_CODES.has(code)) {
    const detail = err instanceof StorageTimeoutError ? err.message : code;
    return {
      line: oneLine(`cannot reach blob storage at ${where.endpoint} (${detail}). ${fixFor(where)}`),
      exitCode: EXIT.unreachable,
    };
  }
  if (isBatonError(err)) return { line: oneLine(`${err.name} (${err.code}): ${err.message}`), exitCode: EXIT.failed };
  const status = statusOf(err);
  if (status !== undefined) {
    const serviceCode = typeof (err as { code?: unknown }).code === 'string' ? (err as { code: string }).code : undefined;
    const hint = status === 403 ? ' Check the account key or SAS in the connection.' : '';
    return {
      line: oneLine(
        `storage answered ${status}${serviceCode ? ` ${serviceCode}` : ''}${where ? ` at ${where.endpoint}` : ''}.${hint}`,
      ),
      exitCode: EXIT.failed,
    };
  }
  if (err instanceof Error) {
    const label = code && code !== err.name ? `${err.name} ${code}` : err.name;
    return { line: oneLine(`${label}: ${err.message}`), exitCode: EXIT.failed };
  }
  return { line: oneLine(`unexpected failure: ${String(err)}`), exitCode: EXIT.failed };
}

function fixFor(where: FailureContext): string {
  let local = false;
  try {
    local = LOCAL_HOSTS.has(new URL(where.endpoint).hostname);
  } catch {
    local = false;
  }
  const setting =
    where.source === '--connection'
      ? '--connection'
      : where.source === 'AzureWebJobsStorage'
        ? 'AzureWebJobsStorage'
        : 'AzureWebJobsStorage in local.settings.json';
  return local
    ? `Is Azurite running? Start it with 'npm start' or check ${setting}.`
    : `Check the network, or the endpoint in ${setting}.`;
}

/** The system error code of a failed request (the SDK puts it on `code`, sometimes only in the message). */
function networkCode(err: unknown): string | undefined {
  if (err instanceof StorageTimeoutError) return err.code;
  if (typeof err !== 'object' || err === null) return undefined;
  for (const candidate of [err, (err as { cause?: unknown }).cause]) {
    const code = (candidate as { code?: unknown } | undefined)?.code;
    if (typeof code === 'string' && UNREACHABLE_CODES.has(code)) return code;
  }
  if (statusOf(err) !== undefined) return undefined;
  const message = (err as { message?: unknown }).message;
  const match = typeof message === 'string' ? /\b(E[A-Z_]{3,})\b/.exec(message) : null;
  if (match?.[1] && UNREACHABLE_CODES.has(match[1])) return match[1];
  const code = (err as { code?: unknown }).code;
  return typeof code === 'string' ? code : undefined;
}

function statusOf(err: unknown): number | undefined {
  const status = (err as { statusCode?: unknown } | null)?.statusCode;
  return typeof status === 'number' ? status : undefined;
}

/** First line only, secrets masked, bounded. */
export function oneLine(text: string): string {
  const first =
    redactSecrets(text)
      .split(/\r?\n/)
      .find((l) => l.trim() !== '') ?? '';
  const flat = first.replace(/\s+/g, ' ').trim();
  return flat.length > 400 ? `${flat.slice(0, 397)}...` : flat;
}
