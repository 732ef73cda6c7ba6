/** Status and service error code of a storage SDK error, or undefined for anything else. */
export function storageErrorOf(err: unknown): { status: number; code: string | undefined } | undefined {
  if (typeof err !== 'object' || err === null) return undefined;
  const status = (err as { statusCode?: unknown }).statusCode;
  if (typeof status !== 'number') return undefined;
  const e = err as {
    code?: unknown;
    details?: { errorCode?: unknown };
    response?: { headers?: { get?(name: string): string | undefined } };
  };
  // HEAD responses have no body, so the service's code is only in the x-ms-error-code header.
  const code =
    (typeof e.details?.errorCode === 'string' ? e.details.errorCode : undefined) ??
    e.response?.headers?.get?.('x-ms-error-code') ??
    (typeof e.code === 'string' ? e.code : undefined);
  return { status, code };
}
